"""Property tests of SigV4 (and SigV2) verification: what real signers sign verifies, and
any request, however malformed, is refused with an S3 error."""

from __future__ import annotations

import string
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

from botocore.auth import S3SigV4QueryAuth
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.s3api import sigv4
from gateway.s3api.sigv2 import authenticate_v2
from gateway.s3api.sigv4 import PayloadMode, authenticate, parse_amz_date, parse_payload_mode
from tests.gateway.s3api.fuzz.common import UNIT, only_s3_errors
from tests.gateway.s3api.test_sigv4 import AK, secret_for, sign_botocore

KEY_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1,
                   max_size=40)
#: header values as clients send them: printable ASCII with runs of spaces and tabs
HEADER_VALUE = st.text(string.ascii_letters + string.digits + string.punctuation + " \t",
                       max_size=30)
QUERY = st.dictionaries(st.text(string.ascii_letters + "-_.", min_size=1, max_size=10),
                        st.text(max_size=15), max_size=4)


def _url(key: str, query: dict[str, str]) -> str:
    url = "http://127.0.0.1:9000/bucket/" + quote(key, safe="/~")
    return url + ("?" + urlencode(query, quote_via=quote) if query else "")


@UNIT
@given(KEY_TEXT, QUERY, st.dictionaries(st.text(string.ascii_lowercase + "-", min_size=1,
                                                max_size=10), HEADER_VALUE, max_size=3))
@example("a  b/../c", {"prefix": "a b+c"}, {"x": "  two  spaces  "})
def test_botocore_signed_requests_verify(key: str, query: dict[str, str],
                                          meta: dict[str, str]) -> None:
    headers = {f"x-amz-meta-{name}": value for name, value in meta.items()}
    wire = sign_botocore("PUT", _url(key, query), headers, b"body")
    ctx = wire.auth()
    assert ctx.access_key == AK and ctx.payload_mode is PayloadMode.SIGNED


@UNIT
@given(KEY_TEXT, QUERY)
def test_botocore_presigned_urls_verify(key: str, query: dict[str, str]) -> None:
    wire = sign_botocore("GET", _url(key, query), signer=S3SigV4QueryAuth, expires=300)
    assert wire.auth().presigned


NAMES = st.sampled_from(["authorization", "x-amz-date", "date", "x-amz-content-sha256", "host",
                         "x-amz-decoded-content-length", "x-amz-meta-a", "x-amz-security-token",
                         "content-md5", "content-type"])
TOKENS = st.sampled_from([
    "AWS4-HMAC-SHA256", "AWS", " ", ",", "=", "/", ";", "Credential=", "SignedHeaders=",
    "Signature=", AK, "20130524", "20130524T000000Z", "us-east-1", "s3", "aws4_request",
    "host", "host;x-amz-date", "a" * 64, "UNSIGNED-PAYLOAD", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
    "99999999T999999Z", "Fri, 24 May 2013 00:00:00 GMT", "\xff", "²", "%", "+", "X-Amz-"])
FRAGMENTED = st.lists(st.one_of(TOKENS, st.text(max_size=6)), max_size=14).map("".join)
LATIN1 = st.text(st.characters(max_codepoint=255), max_size=30)
QUERY_NAMES = st.sampled_from(["X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature",
                               "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Expires",
                               "X-Amz-Content-Sha256", "AWSAccessKeyId", "Signature",
                               "Expires", "versionId", "uploads", ""])


@UNIT
@given(st.sampled_from(["GET", "PUT", "POST", "DELETE", "HEAD", "BREW", ""]),
       st.one_of(LATIN1, FRAGMENTED.map(lambda s: "/" + s)),
       st.lists(st.tuples(st.one_of(QUERY_NAMES, LATIN1), st.one_of(FRAGMENTED, LATIN1)),
                max_size=6).map(lambda pairs: "&".join(f"{k}={v}" for k, v in pairs)),
       st.lists(st.tuples(st.one_of(NAMES, LATIN1.map(str.lower)),
                          st.one_of(FRAGMENTED, LATIN1)), max_size=8),
       st.floats(min_value=0, max_value=4e9))
@example("GET", "/b/k", "X-Amz-Expires=²&X-Amz-Algorithm=AWS4-HMAC-SHA256", [], 0.0)
@example("GET", "/%ff%", "", [("authorization", ("AWS4-HMAC-SHA256 Credential=a/²/r/s3/"
                                                "aws4_request,SignedHeaders=host,Signature=x"))],
         0.0)
def test_any_request_is_refused_with_an_s3_error(method: str, path: str, query: str,
                                                 headers: list[tuple[str, str]],
                                                 now: float) -> None:
    with only_s3_errors():
        authenticate(method=method, raw_path=path, query=query, headers=headers,
                     secret_for=secret_for, now=now)
    hmap: dict[str, list[str]] = {}
    for name, value in headers:
        hmap.setdefault(name, []).append(value)
    with only_s3_errors():
        authenticate_v2(method=method, raw_path=path, query=query, headers=hmap,
                        virtual_bucket=None, secret_for=secret_for, now=now,
                        region="us-east-1")


@UNIT
@given(st.text(max_size=80))
@example("%")
@example("/a%2/b")
@example("/\u00e9/%C3%A9")
def test_canonical_uri_is_stable(path: str) -> None:
    canonical = sigv4._canonical_uri(path)
    assert sigv4._canonical_uri(canonical) == canonical  # S3 does not double-encode
    assert all(c in string.ascii_letters + string.digits + "-_.~/%" for c in canonical)


@UNIT
@given(st.text(string.ascii_letters + string.digits + "-_.~", max_size=20), st.data())
def test_canonical_uri_ignores_which_unreserved_bytes_were_escaped(path: str,
                                                                   data: st.DataObject) -> None:
    escaped = "".join(f"%{ord(c):02X}" if data.draw(st.booleans()) else c for c in path)
    assert sigv4._canonical_uri("/" + escaped) == sigv4._canonical_uri("/" + path)


@UNIT
@given(LATIN1)
@example("\u00c3\u00a0  x")  # UTF-8 "à" then spaces: C3 A0 is a letter, not a space
def test_canonical_header_value_is_trimmed_and_collapsed(value: str) -> None:
    canonical = sigv4._canonical_value(value)
    assert sigv4._canonical_value(canonical) == canonical
    assert "  " not in canonical and canonical == canonical.strip(" \t")


@UNIT
@given(st.one_of(st.text(max_size=70), st.sampled_from([m.value for m in PayloadMode]),
                 st.text("0123456789abcdefABCDEF", min_size=64, max_size=64)))
def test_payload_mode_is_parsed_or_refused(value: str) -> None:
    with only_s3_errors():
        mode, digest = parse_payload_mode(value)
        assert (digest is not None) == (mode is PayloadMode.SIGNED)


@UNIT
@given(st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 31)))
def test_amz_date_round_trips(when: datetime) -> None:
    moment = when.replace(microsecond=0, tzinfo=UTC)
    assert parse_amz_date(moment.strftime("%Y%m%dT%H%M%SZ")) == moment.timestamp()


@UNIT
@given(st.text(max_size=20))
@example("20130230T000000Z")
@example("２０１３0524T000000Z")
def test_amz_date_is_a_date_or_none(value: str) -> None:
    parsed = parse_amz_date(value)
    assert parsed is None or isinstance(parsed, float)
