"""Property tests of request-header validation: response overrides, metadata and its size
limit, tagging, Content-MD5, conditions, checksum headers and routing."""

from __future__ import annotations

import base64
import hashlib
import string
from dataclasses import replace

from hypothesis import example, given
from hypothesis import strategies as st

from gateway.protocol.errors import InvalidArgument, MetadataTooLarge
from gateway.protocol.targets import Level
from gateway.s3api import checksum_headers as ch
from gateway.s3api import headers as h
from gateway.s3api.body import request_body
from gateway.s3api.endpoint import ANONYMOUS, HANDLERS
from gateway.s3api.routing import route
from gateway.s3api.sigv4 import PayloadMode
from tests.gateway.s3api.fuzz.common import UNIT, only_s3_errors

ANY = st.text(max_size=40)
#: what the server hands over: header values as latin-1 text of the wire bytes
LATIN1 = st.text(st.characters(max_codepoint=255), max_size=40)
CHECKSUM_NAMES = ["x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-sha1",
                  "x-amz-checksum-sha256", "x-amz-checksum-crc64nvme", "x-amz-checksum-md5",
                  "x-amz-checksum-algorithm", "x-amz-checksum-type", "x-amz-trailer",
                  "x-amz-sdk-checksum-algorithm", "x-amz-decoded-content-length",
                  "content-length", "content-md5", "x-amz-tagging", "x-amz-meta-a",
                  "content-encoding", "content-type", "if-modified-since", "if-match"]
CHECKSUM_VALUES = st.one_of(
    LATIN1, st.sampled_from(["CRC32", "crc32c", "SHA256", "MD5", "COMPOSITE", "FULL_OBJECT",
                             "composite", "x-amz-checksum-crc32", "x-amz-checksum-crc32, x",
                             "AAAAAA==", "AAAAAAAAAAA=", "1B2M2Y8AsgTpgAmY7PhCfg==", "²", "-1",
                             "9" * 5000, "aws-chunked, gzip", "Sun, 06 Nov 1994 08:49:37 GMT",
                             "Sun, 99 Nov 1994 08:49:37 GMT", "a=b&a=c", "aws:x=1"]),
    st.binary(min_size=4, max_size=32).map(lambda b: base64.b64encode(b).decode()))
HEADERS = st.dictionaries(st.one_of(st.sampled_from(CHECKSUM_NAMES),
                                    st.text(string.ascii_lowercase + "-", max_size=20)),
                          CHECKSUM_VALUES, max_size=6)


@UNIT
@given(st.sampled_from(sorted(h.RESPONSE_OVERRIDES)), st.one_of(ANY, LATIN1))
@example("response-content-disposition", "a\nb")
@example("response-content-type", "a\x00b")
@example("response-expires", "\u2028")
def test_response_overrides_are_sendable_or_refused(param: str, value: str) -> None:
    try:
        sent = h.header_value(param, value)
    except InvalidArgument:
        return
    wire = sent.encode("latin-1")
    assert not any(b < 0x20 and b != 0x09 or b == 0x7F for b in wire)


@UNIT
@given(st.dictionaries(st.text(string.ascii_lowercase + string.digits + "-", min_size=1,
                               max_size=30), LATIN1, max_size=10),
       st.integers(0, 3000))
def test_user_metadata_within_the_limit_or_metadata_too_large(meta: dict[str, str],
                                                              pad: int) -> None:
    headers = {f"x-amz-meta-{k}": v for k, v in meta.items()}
    headers["x-amz-meta-pad"] = "p" * pad
    size = sum(len(k) + len(v) for k, v in {**meta, "pad": "p" * pad}.items())
    try:
        got = h.object_meta(headers)
    except MetadataTooLarge:
        assert size > h.MAX_USER_METADATA
        return
    assert size <= h.MAX_USER_METADATA and got.user["pad"] == "p" * pad


@UNIT
@given(HEADERS)
@example({"x-amz-tagging": "a=1&a=2"})
@example({"x-amz-tagging": "&".join(f"k{i}=v" for i in range(11))})
@example({"content-md5": "AAAA"})
def test_object_headers_parse_or_fail_with_s3_errors(headers: dict[str, str]) -> None:
    with only_s3_errors():
        h.object_meta(headers)
    with only_s3_errors():
        h.content_md5(headers)
    h.conditions(headers)  # unparsable dates are ignored, as S3 does
    with only_s3_errors():
        ch.upload_checksum(headers)
    with only_s3_errors():
        ch.object_checksum(headers)


@UNIT
@given(st.sampled_from([m for m in PayloadMode]), HEADERS)
@example(PayloadMode.STREAMING_SIGNED, {"x-amz-decoded-content-length": "²"})
@example(PayloadMode.UNSIGNED, {"content-length": "9" * 5000})
@example(PayloadMode.UNSIGNED, {"x-amz-trailer": "x-amz-checksum-crc32"})
def test_body_headers_are_accepted_or_refused_with_s3_errors(mode: PayloadMode,
                                                             headers: dict[str, str]) -> None:
    auth = replace(ANONYMOUS, payload_mode=mode, payload_sha256=hashlib.sha256().hexdigest()
                   if mode is PayloadMode.SIGNED else None)

    async def nothing():  # type: ignore[no-untyped-def]
        yield b""  # pragma: no cover - never iterated

    with only_s3_errors():
        request_body(nothing(), headers, auth)


@UNIT
@given(st.sampled_from(["GET", "PUT", "POST", "DELETE", "HEAD", "OPTIONS", "PATCH", "get", ""]),
       st.sampled_from(list(Level)),
       st.dictionaries(st.one_of(st.sampled_from(["uploads", "uploadId", "partNumber", "tagging",
                                                  "versioning", "versions", "lifecycle", "cors",
                                                  "delete", "acl", "policy", "list-type",
                                                  "attributes", "location", "torrent"]), ANY),
                       ANY, max_size=4),
       st.sampled_from([{}, {"x-amz-copy-source": "/b/k"}]))
def test_routing_is_an_operation_or_an_s3_error(method: str, level: Level,
                                                query: dict[str, str],
                                                headers: dict[str, str]) -> None:
    with only_s3_errors():
        # PostObject's handler is bound per endpoint (it checks the form's signature)
        assert route(method, level, query, headers) in {*HANDLERS, "PostObject"}
