"""Generated malformed requests sent over raw HTTP to a real gateway: every answer is a
success or a well-formed S3 XML error below 500, and the server stays up.

Requests are syntactically valid HTTP/1.1 (an HTTP parse error never reaches the S3 layer);
about half are correctly signed, so that they get past authentication into the parsers
of headers, query parameters and bodies (XML documents, aws-chunked).
"""

from __future__ import annotations

import socket
import string
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from defusedxml import ElementTree
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import make_client
from tests.support.server import SquallProcess
from tests.support.signing import signed_headers

BUCKET = "fuzz"
KEY = "obj"


@dataclass
class Target:
    server: SquallProcess
    upload_id: str


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    data: Path = tmp_path_factory.mktemp("wire-fuzz") / "data"
    server = SquallProcess(data).start()
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key=KEY, Body=b"0123456789" * 100)
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key="mpu")["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key="mpu", UploadId=upload_id, PartNumber=1, Body=b"p" * 10)
    yield Target(server, upload_id)
    log = server.log()
    assert server.stop() == 0, log
    assert "Traceback" not in log, log


# --- requests ----------------------------------------------------------------------------------

#: printable ASCII but space (a request target cannot hold it) and "#"
TARGET_TEXT = st.text(st.sampled_from(sorted(set(string.printable[:94]) - {"#"})), max_size=20)
QUERY_NAMES = st.sampled_from(
    ["uploads", "uploadId", "partNumber", "tagging", "versioning", "versions", "lifecycle",
     "cors", "delete", "attributes", "list-type", "max-keys", "prefix", "delimiter",
     "continuation-token", "start-after", "marker", "versionId", "version-id-marker",
     "key-marker", "max-parts", "part-number-marker", "max-uploads", "encoding-type",
     "fetch-owner", "response-content-type", "response-content-disposition",
     "response-expires", "response-cache-control", "location", "acl", "policy", "append"])
NUMBERS = st.sampled_from(["0", "1", "-1", "2147483648", "9" * 400, "²", "١", "1e3", " 1",
                           "0x1", "+1", "", "10001", "%C2%B2", "%0A", "%00", "%E2%80%A8"])
QUERY = st.lists(st.tuples(QUERY_NAMES, st.one_of(NUMBERS, TARGET_TEXT).map(
    lambda s: quote(s, safe="%"))), max_size=4)
HEADER_NAMES = st.sampled_from(
    ["range", "x-amz-copy-source", "x-amz-copy-source-range", "x-amz-write-offset-bytes",
     "x-amz-meta-a", "x-amz-tagging", "content-md5", "content-type", "content-encoding",
     "content-disposition", "cache-control", "expires", "if-match", "if-none-match",
     "if-modified-since", "if-unmodified-since", "x-amz-checksum-crc32",
     "x-amz-checksum-sha256", "x-amz-checksum-algorithm", "x-amz-checksum-type",
     "x-amz-checksum-mode", "x-amz-sdk-checksum-algorithm", "x-amz-trailer",
     "x-amz-decoded-content-length", "x-amz-metadata-directive", "x-amz-tagging-directive",
     "x-amz-object-attributes", "x-amz-max-parts", "x-amz-part-number-marker",
     "x-amz-bypass-governance-retention", "origin", "access-control-request-method",
     "x-amz-mfa", "x-amz-storage-class", "x-amz-acl"])
HEADER_VALUES = st.one_of(
    NUMBERS, st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF,
                                   exclude_characters="\x7f"), max_size=30),
    st.sampled_from(["bytes=0-", "bytes=-5", "bytes=5-1", "bytes=0-" + "9" * 400,
                     "bytes=²-3", "/fuzz/obj", "fuzz/obj?versionId=", "/fuzz/obj?versionId=x",
                     "/nosuch/obj", "/fuzz/%FF", "CRC32", "SHA256", "FULL_OBJECT", "ENABLED",
                     "COPY", "REPLACE", "aws-chunked", "x-amz-checksum-crc32", "*", '"x"',
                     "Sun, 06 Nov 1994 08:49:37 GMT", "AAAAAA==", "a=b&a=c", "ETag,Checksum"]))
HEADERS = st.dictionaries(st.one_of(HEADER_NAMES, st.text(string.ascii_lowercase + "-",
                                                          min_size=1, max_size=12)),
                          HEADER_VALUES, max_size=5)


def _xml(root: str, inner: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return inner.map(lambda s: f"<{root}>{s}</{root}>".encode())


ELEMENT = st.builds(lambda tag, text: f"<{tag}>{text}</{tag}>",
                    st.sampled_from(["Part", "PartNumber", "ETag", "Object", "Key", "VersionId",
                                     "Quiet", "Status", "MfaDelete", "TagSet", "Tag", "Value",
                                     "ChecksumCRC32", "Rule", "Filter", "CORSRule"]),
                    st.one_of(NUMBERS, st.text("<>&/PartNumbrETgKeyObjc\"'0123456789",
                                               max_size=30)))
PART = st.builds(lambda n, e: f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>",
                 NUMBERS, st.sampled_from(['"x"', "", "&quot;", "<", "1"]))
BODIES = st.one_of(
    st.just(b""), st.binary(max_size=64),
    _xml("CompleteMultipartUpload", st.lists(st.one_of(PART, ELEMENT), max_size=4).map("".join)),
    _xml("Delete", st.lists(st.one_of(ELEMENT, st.builds(
        lambda k: f"<Object><Key>{k}</Key></Object>", st.text("ab/.", max_size=5))),
        max_size=4).map("".join)),
    _xml("VersioningConfiguration", st.lists(ELEMENT, max_size=3).map("".join)),
    _xml("Tagging", st.lists(ELEMENT, max_size=3).map("".join)),
    _xml("LifecycleConfiguration", st.lists(ELEMENT, max_size=3).map("".join)),
    _xml("CORSConfiguration", st.lists(ELEMENT, max_size=3).map("".join)),
    st.sampled_from([b"5\r\nhello\r\n0\r\n\r\n", b"ffffffffffffffff\r\n", b"0\r\n",
                     b"5;chunk-signature=" + b"0" * 64 + b"\r\nhello\r\n"]))


#: method, request target, headers, body, whether to sign it, x-amz-content-sha256 to sign
Case = tuple[str, str, dict[str, str], bytes, bool, str | None]


@st.composite
def requests(draw: st.DrawFn, upload_id: str) -> Case:
    method = draw(st.sampled_from(["GET", "PUT", "POST", "DELETE", "HEAD"] * 3
                                  + ["OPTIONS", "PATCH"]))
    path = draw(st.sampled_from([f"/{BUCKET}/{KEY}", f"/{BUCKET}", f"/{BUCKET}/mpu", "/",
                                 f"/{BUCKET}/new", "/nosuch/k"]))
    path += draw(st.one_of(st.just(""), TARGET_TEXT.map(lambda s: quote(s, safe="/%"))))
    query = draw(QUERY)
    if draw(st.booleans()):
        query.append(("uploadId", upload_id))
    target = path + ("?" + "&".join(f"{k}={v}" for k, v in query) if query else "")
    headers = draw(HEADERS)
    payload_hash = draw(st.sampled_from(
        [None, None, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
         "UNSIGNED-PAYLOAD", "junk", "0" * 64]))
    signed = draw(st.sampled_from([True, True, True, False]))  # most get past auth
    return method, target, headers, draw(BODIES), signed, payload_hash


# --- the wire ----------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def _exchange(port: int, method: str, target: str, headers: dict[str, str],
              body: bytes) -> Answer:
    lines = [f"{method} {target} HTTP/1.1", f"host: 127.0.0.1:{port}",
             f"content-length: {len(body)}", "connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items() if k not in ("host", "content-length")]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body  # UTF-8, as clients send it
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(raw)
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
    head, _, content = bytes(received).partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    answer_headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        answer_headers[name.strip().lower()] = value.strip()
    return Answer(int(status_line.split(" ")[1]), answer_headers, content)


def _check(answer: Answer, method: str) -> None:
    assert answer.status < 500 or answer.status == 501, answer
    if answer.status < 300 or answer.status == 304 or method == "HEAD":
        return
    assert answer.headers.get("content-type") == "application/xml", answer
    root = ElementTree.fromstring(answer.body)
    assert root.tag == "Error" and root.findtext("Code"), answer
    assert root.findtext("Code") != "InternalError", answer


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                   HealthCheck.too_slow])
@given(data=st.data())
@example(data=None)
def test_malformed_requests_get_s3_errors(target: Target, data: st.DataObject | None) -> None:
    server = target.server
    if data is None:  # the probes of issue 18, explicitly
        cases = [("GET", f"/{BUCKET}/{KEY}", {"range": "bytes=0-" + "9" * 5000}, b"", True,
                  None),
                 ("GET", f"/{BUCKET}/{KEY}?partNumber=%C2%B2", {}, b"", True, None),
                 ("GET", f"/{BUCKET}/{KEY}?response-content-type=a%0Ab", {}, b"", True, None),
                 ("GET", f"/{BUCKET}/{KEY}?response-content-type=%E2%80%A8", {}, b"", True, None),
                 ("POST", f"/{BUCKET}/mpu?uploadId={target.upload_id}", {},
                  (b"<CompleteMultipartUpload><Part><PartNumber>\xc2\xb2</PartNumber><ETag>x"
                  b"</ETag></Part></CompleteMultipartUpload>"), True, None)]
    else:
        cases = [data.draw(requests(target.upload_id))]
    for method, path, headers, body, signed, payload_hash in cases:
        if signed:
            headers = signed_headers(method, f"{server.endpoint}{path}", body, headers,
                                     payload_hash=payload_hash)
        elif payload_hash is not None:
            headers = {**headers, "x-amz-content-sha256": payload_hash}
        _check(_exchange(server.port, method, path, headers, body), method)
        assert server.proc is not None and server.proc.poll() is None, server.log()


def test_the_bucket_survived_the_fuzz(target: Target) -> None:
    """The server is healthy and serves real clients after the fuzz."""
    assert httpx.get(f"{target.server.endpoint}/_squall/health", timeout=5).status_code == 200
    s3 = make_client(target.server.endpoint)
    name = f"after-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="k", Body=b"still here")
    assert s3.get_object(Bucket=name, Key="k")["Body"].read() == b"still here"
