"""Numbers on the wire that are not numbers: "²" (passes ``str.isdigit``), Arabic-Indic
digits, 5,000-digit values. Each gets the error S3 gives (or, for a Range, the whole
object, as S3 ignores a Range it cannot parse), never a 500, and loses nothing."""

from __future__ import annotations

import base64
import hashlib
import urllib.parse
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.test_bad_requests import error_code
from tests.support.server import ACCESS_KEY, SquallProcess
from tests.support.signing import signed_headers


def send(method: str, url: str, body: bytes = b"",
         headers: dict[str, str] | None = None) -> httpx.Response:
    """A signed request whose header values go out as UTF-8, as clients send them."""
    signed = signed_headers(method, url, body, headers)
    return httpx.request(method, url, content=body,
                         headers={k: v.encode() for k, v in signed.items()})


HUGE = "9" * 5000
#: "²" passes str.isdigit(); "١٢" are Arabic-Indic digits, "１２" full-width ones: int()
#: accepts the last two
NOT_NUMBERS = ["²", "١٢", "１２", HUGE, "1_0", "0x1", "1.5", "", "++1"]
QUERY_NOT_NUMBERS = [urllib.parse.quote(v) for v in NOT_NUMBERS if v] + ["%201"]
HEADER_NOT_NUMBERS = ["²", "١٢", "１２", HUGE, "1_0", "0x1", "1.5"]
BODY = b"0123456789"


def code(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, error_code(response)


@pytest.fixture
def obj(squall: SquallProcess, bucket: str) -> str:
    url = f"{squall.endpoint}/{bucket}/obj"
    assert send("PUT", url, BODY).status_code == 200
    return url


@pytest.mark.parametrize("value", [f"bytes=0-{HUGE}", f"bytes={HUGE}-", f"bytes=-{HUGE}",
                                   "bytes=0-²", "bytes=²-3", "bytes=١-٣", "bytes=0-1_0",
                                   "bytes= 0-3", "bytes=0-3;x"])
def test_unparsable_range_is_the_whole_object(obj: str, value: str) -> None:
    response = send("GET", obj, headers={"range": value})
    assert (response.status_code, response.content) == (200, BODY)
    assert "content-range" not in response.headers


def test_long_but_valid_range_is_clamped(obj: str) -> None:
    response = send("GET", obj, headers={"range": "bytes=4-" + "9" * 19})
    assert (response.status_code, response.content) == (206, BODY[4:])
    assert response.headers["content-range"] == f"bytes 4-9/{len(BODY)}"
    head = send("HEAD", obj, headers={"range": "bytes=4-" + "9" * 19})
    assert (head.status_code, head.headers["content-length"]) == (206, "6")


@pytest.mark.parametrize("value", QUERY_NOT_NUMBERS + ["0", "10001"])
def test_get_part_number(obj: str, value: str) -> None:
    for method in ("GET", "HEAD"):
        response = send(method, f"{obj}?partNumber={value}")
        assert response.status_code == 400
        if method == "GET":
            assert error_code(response) == "InvalidArgument"


def test_get_part_number_through_boto3(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="p", Body=BODY)

    def rewrite(request: Any, **_: Any) -> None:
        request.url = request.url.replace("partNumber=1", "partNumber=%C2%B2")

    s3.meta.events.register("before-sign.s3.GetObject", rewrite)
    try:
        with pytest.raises(ClientError) as exc:
            s3.get_object(Bucket=bucket, Key="p", PartNumber=1)
    finally:
        s3.meta.events.unregister("before-sign.s3.GetObject", rewrite)
    error = exc.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == \
        ("InvalidArgument", 400)
    assert s3.get_object(Bucket=bucket, Key="p")["Body"].read() == BODY


@pytest.fixture
def upload(s3: Any, bucket: str) -> tuple[str, str]:
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload_id, PartNumber=1, Body=BODY)
    return bucket, upload_id


@pytest.mark.parametrize("value", QUERY_NOT_NUMBERS)
def test_upload_part_number(squall: SquallProcess, s3: Any, upload: tuple[str, str],
                            value: str) -> None:
    bucket, upload_id = upload
    url = f"{squall.endpoint}/{bucket}/mp?partNumber={value}&uploadId={upload_id}"
    assert code(send("PUT", url, b"other")) == (400, "InvalidArgument")
    parts = s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload_id)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in parts] == [(1, len(BODY))]


@pytest.mark.parametrize("value", HEADER_NOT_NUMBERS + ["bytes=0-" + HUGE, "bytes=²-3"])
def test_copy_source_range(squall: SquallProcess, obj: str, upload: tuple[str, str],
                           value: str) -> None:
    bucket, upload_id = upload
    url = f"{squall.endpoint}/{bucket}/mp?partNumber=2&uploadId={upload_id}"
    source = urllib.parse.urlsplit(obj).path
    range_value = value if value.startswith("bytes=") else f"bytes=0-{value}"
    response = send("PUT", url, headers={"x-amz-copy-source": source,
                                         "x-amz-copy-source-range": range_value})
    assert code(response) == (400, "InvalidArgument")


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_complete_part_number_in_xml(squall: SquallProcess, s3: Any,
                                     upload: tuple[str, str], value: str) -> None:
    bucket, upload_id = upload
    etag = s3.list_parts(Bucket=bucket, Key="mp", UploadId=upload_id)["Parts"][0]["ETag"]
    body = (f"<CompleteMultipartUpload><Part><PartNumber>{value}</PartNumber>"
            f"<ETag>{etag}</ETag></Part></CompleteMultipartUpload>").encode()
    response = send("POST", f"{squall.endpoint}/{bucket}/mp?uploadId={upload_id}", body)
    assert code(response) == (400, "MalformedXML")
    # The upload is intact and can still be completed.
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload_id,
                                 MultipartUpload={"Parts": [{"PartNumber": 1,
                                                             "ETag": etag}]})
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == BODY


@pytest.mark.parametrize("value", HEADER_NOT_NUMBERS + ["-1"])
def test_write_offset(obj: str, value: str) -> None:
    response = send("PUT", obj, b"more", {"x-amz-write-offset-bytes": value})
    assert code(response) == (400, "InvalidArgument")
    assert send("GET", obj).content == BODY


@pytest.mark.parametrize("value", HEADER_NOT_NUMBERS)
def test_decoded_content_length(squall: SquallProcess, obj: str, value: str) -> None:
    payload = b"more"
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(payload), payload)
    headers = {"x-amz-decoded-content-length": value, "content-encoding": "aws-chunked",
               "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER"}
    signed = signed_headers("PUT", obj, body, headers)
    signed["x-amz-content-sha256"] = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    response = httpx.put(obj, content=body, headers={k: v.encode() for k, v in signed.items()})
    assert response.status_code == 400, response.text
    assert send("GET", obj).content == BODY


@pytest.mark.parametrize("name", ["x-amz-max-parts", "x-amz-part-number-marker"])
@pytest.mark.parametrize("value", HEADER_NOT_NUMBERS + ["2147483648"])
def test_object_attributes_numbers(obj: str, name: str, value: str) -> None:
    response = send("GET", f"{obj}?attributes", headers={
        "x-amz-object-attributes": "ObjectParts", name: value})
    assert code(response) == (400, "InvalidArgument")


@pytest.mark.parametrize("param", ["max-keys", "max-uploads", "max-parts",
                                   "part-number-marker", "max-buckets"])
@pytest.mark.parametrize("value", QUERY_NOT_NUMBERS + ["2147483648", "-1"])
def test_query_numbers(squall: SquallProcess, upload: tuple[str, str], param: str,
                       value: str) -> None:
    bucket, upload_id = upload
    url = {"max-keys": f"{squall.endpoint}/{bucket}?list-type=2&",
           "max-uploads": f"{squall.endpoint}/{bucket}?uploads&",
           "max-parts": f"{squall.endpoint}/{bucket}/mp?uploadId={upload_id}&",
           "part-number-marker": f"{squall.endpoint}/{bucket}/mp?uploadId={upload_id}&",
           "max-buckets": f"{squall.endpoint}/?"}[param]
    assert code(send("GET", f"{url}{param}={value}")) == (400, "InvalidArgument")


def test_max_keys_through_boto3(s3: Any, bucket: str) -> None:
    def rewrite(request: Any, **_: Any) -> None:
        request.url = request.url.replace("max-keys=5", "max-keys=%D9%A5")  # "٥"

    s3.meta.events.register("before-sign.s3.ListObjectsV2", rewrite)
    try:
        with pytest.raises(ClientError) as exc:
            s3.list_objects_v2(Bucket=bucket, MaxKeys=5)
    finally:
        s3.meta.events.unregister("before-sign.s3.ListObjectsV2", rewrite)
    assert exc.value.response["Error"]["Code"] == "InvalidArgument"


def _md5(body: bytes) -> dict[str, str]:
    return {"content-md5": base64.b64encode(hashlib.md5(body).digest()).decode()}


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_lifecycle_days(squall: SquallProcess, bucket: str, value: str) -> None:
    body = (f"<LifecycleConfiguration><Rule><ID>r</ID><Filter><Prefix>p/</Prefix></Filter>"
            f"<Status>Enabled</Status><Expiration><Days>{value}</Days></Expiration></Rule>"
            f"</LifecycleConfiguration>").encode()
    url = f"{squall.endpoint}/{bucket}?lifecycle"
    assert code(send("PUT", url, body, _md5(body))) == (400, "MalformedXML")
    assert code(send("GET", url)) == (404, "NoSuchLifecycleConfiguration")


@pytest.mark.parametrize("value", NOT_NUMBERS)
def test_cors_max_age(squall: SquallProcess, bucket: str, value: str) -> None:
    body = (f"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin>"
            f"<AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>{value}</MaxAgeSeconds>"
            f"</CORSRule></CORSConfiguration>").encode()
    url = f"{squall.endpoint}/{bucket}?cors"
    assert code(send("PUT", url, body, _md5(body))) == (400, "MalformedXML")


@pytest.mark.parametrize("value", QUERY_NOT_NUMBERS)
def test_presigned_expires(s3: Any, obj: str, value: str) -> None:
    bucket, key = urllib.parse.urlsplit(obj).path.lstrip("/").split("/", 1)
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                    ExpiresIn=60)
    bad = url.replace("X-Amz-Expires=60", f"X-Amz-Expires={value}")
    assert bad != url
    response = httpx.get(bad)
    assert code(response) == (400, "AuthorizationQueryParametersError")


@pytest.mark.parametrize("value", QUERY_NOT_NUMBERS)
def test_presigned_v2_expires(squall: SquallProcess, obj: str, value: str) -> None:
    response = httpx.get(f"{obj}?AWSAccessKeyId={ACCESS_KEY}&Expires={value}&Signature=x")
    assert code(response) == (403, "AccessDenied")
