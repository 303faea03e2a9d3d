"""``response-*`` overrides and content headers that an HTTP header cannot carry, and
S3's 2 KB limit on user metadata: clean 400s, the connection kept, nothing lost."""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.test_bad_requests import error_code
from tests.support.server import SquallProcess
from tests.support.signing import send, signed_headers

OVERRIDES = ["response-content-type", "response-content-disposition",
             "response-content-encoding", "response-content-language",
             "response-cache-control", "response-expires"]
# LF, CR, CRLF + an injected header, NUL, other controls, U+2028, outside ISO-8859-1
UNSENDABLE = ["a%0Ab", "a%0Db", "a%0D%0AX-Injected:%201", "a%00b", "a%01b", "a%7Fb",
              "a%1Fb", "%E2%80%A8", "%E6%97%A5%E6%9C%AC", "attachment%3B%20filename%3D%22D%E2%80%99Arcy.jpg%22"]
BODY = b"payload"


def _code(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    resp = exc.value.response
    return resp["Error"]["Code"], resp["ResponseMetadata"]["HTTPStatusCode"]


@pytest.fixture(scope="module")
def obj(squall: SquallProcess, s3: Any) -> str:
    s3.create_bucket(Bucket="overrides")
    s3.put_object(Bucket="overrides", Key="o", Body=BODY, ContentType="text/plain")
    return f"{squall.endpoint}/overrides/o"


@pytest.mark.parametrize("param", OVERRIDES)
@pytest.mark.parametrize("value", UNSENDABLE)
def test_unsendable_override_is_invalid_argument(obj: str, param: str, value: str) -> None:
    url = f"{obj}?{param}={value}"
    with httpx.Client() as client:
        response = client.get(url, headers=signed_headers("GET", url))
        assert (response.status_code, error_code(response)) == (400, "InvalidArgument")
        assert "x-injected" not in response.headers
        head = client.head(url, headers=signed_headers("HEAD", url))
        assert (head.status_code, head.headers["x-amz-error-code"]) == \
            (400, "InvalidArgument")
        # The connection was answered, not dropped, and serves the next request.
        again = client.get(obj, headers=signed_headers("GET", obj))
        assert (again.status_code, again.content) == (200, BODY)
        assert again.headers["content-type"] == "text/plain"


@pytest.mark.parametrize(("value", "sent"), [("a%09b", b"a\tb"),
                                             ("caf%C3%A9", "café".encode("latin-1")),
                                             ("inline", b"inline")])
def test_sendable_overrides_are_sent(obj: str, value: str, sent: bytes) -> None:
    url = f"{obj}?response-content-disposition={value}"
    response = send("GET", url)
    assert response.status_code == 200
    assert dict(response.headers.raw)[b"content-disposition"] == sent


def test_boto3_override_outside_latin1(s3: Any, obj: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket="overrides", Key="o",
                      ResponseContentDisposition='attachment; filename="D’Arcy.jpg"')
    assert _code(exc) == ("InvalidArgument", 400)
    url = s3.generate_presigned_url("get_object", Params={
        "Bucket": "overrides", "Key": "o", "ResponseContentType": "text/plain\r\nX-A: b"})
    response = httpx.get(url)
    assert (response.status_code, error_code(response)) == (400, "InvalidArgument")


def test_override_checked_before_the_object_is_looked_up(squall: SquallProcess,
                                                          obj: str) -> None:
    response = send("GET", f"{squall.endpoint}/overrides/missing?"
                           "response-content-type=a%0Ab")
    assert (response.status_code, error_code(response)) == (400, "InvalidArgument")


@pytest.mark.parametrize("header", ["content-disposition", "content-type",
                                    "cache-control", "x-amz-meta-note"])
@pytest.mark.parametrize("bad", [b"\x00", b"\x01", b"\x7f", b"\x1b[31m"])
def test_stored_content_header_with_control_characters(
        squall: SquallProcess, obj: str, header: str, bad: bytes) -> None:
    """The HTTP parser refuses such a value before the S3 layer sees it: 400, and the
    object is neither created nor changed."""
    url = f"{squall.endpoint}/overrides/ctl"
    headers = signed_headers("PUT", url, b"x", {header: "ab"})
    lines = [b"PUT /overrides/ctl HTTP/1.1"]
    lines += [f"{k}: {v}".encode("latin-1") for k, v in headers.items()
              if k.lower() != header]
    lines += [header.encode() + b": a" + bad + b"b", b"content-length: 1", b"", b"x"]
    with socket.create_connection(("127.0.0.1", squall.port), timeout=5) as sock:
        sock.sendall(b"\r\n".join(lines))
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 400"), status_line
    assert send("GET", url).status_code == 404
    assert send("GET", obj).content == BODY


# --- user metadata: at most 2 KB of keys and values (S3's limit) ------------------------

def _metadata(total: int, entries: int = 4) -> dict[str, str]:
    """``entries`` metadata entries whose keys and values add up to ``total`` bytes."""
    keys = [f"k{i}" for i in range(entries)]
    room = total - sum(len(k) for k in keys)
    sizes = [room // entries + (1 if i < room % entries else 0) for i in range(entries)]
    return {k: "v" * n for k, n in zip(keys, sizes, strict=True)}


def test_metadata_limit_on_put(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="at-limit", Body=b"x", Metadata=_metadata(2048))
    assert len(s3.head_object(Bucket=bucket, Key="at-limit")["Metadata"]) == 4
    s3.put_object(Bucket=bucket, Key="kept", Body=b"old")
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="kept", Body=b"new", Metadata=_metadata(2049))
    assert _code(exc) == ("MetadataTooLarge", 400)
    assert s3.get_object(Bucket=bucket, Key="kept")["Body"].read() == b"old"


def test_metadata_limit_on_copy_replace(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="src", Body=b"source", Metadata=_metadata(2048))
    s3.put_object(Bucket=bucket, Key="dst", Body=b"old")
    source = {"Bucket": bucket, "Key": "src"}
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=bucket, Key="dst", CopySource=source,
                       MetadataDirective="REPLACE", Metadata=_metadata(2049, entries=30))
    assert _code(exc) == ("MetadataTooLarge", 400)
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == b"old"
    # COPY keeps the source's metadata (at the limit), REPLACE at the limit is accepted.
    s3.copy_object(Bucket=bucket, Key="dst", CopySource=source)
    assert s3.head_object(Bucket=bucket, Key="dst")["Metadata"] == _metadata(2048)
    s3.copy_object(Bucket=bucket, Key="dst", CopySource=source,
                   MetadataDirective="REPLACE", Metadata=_metadata(2048, entries=2))
    assert s3.head_object(Bucket=bucket, Key="dst")["Metadata"] == _metadata(2048, 2)


def test_metadata_limit_on_create_multipart_upload(s3: Any, bucket: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.create_multipart_upload(Bucket=bucket, Key="mp", Metadata=_metadata(4096))
    assert _code(exc) == ("MetadataTooLarge", 400)
    assert not s3.list_multipart_uploads(Bucket=bucket).get("Uploads")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp", Metadata=_metadata(2048))
    s3.abort_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload["UploadId"])


def test_metadata_limit_counts_raw_bytes(squall: SquallProcess, bucket: str) -> None:
    """Non-ASCII metadata (sent as UTF-8 by clients other than boto3) counts in bytes."""
    url = f"{squall.endpoint}/{bucket}/utf8"
    value = "é" * 1100  # 1,100 characters, 2,200 bytes of UTF-8
    headers = signed_headers("PUT", url, b"x", {"x-amz-meta-n": value})
    response = httpx.put(url, content=b"x",
                         headers={k: v.encode() for k, v in headers.items()})
    assert (response.status_code, error_code(response)) == (400, "MetadataTooLarge")
    assert send("GET", url).status_code == 404
