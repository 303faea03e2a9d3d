"""Bad inputs from boto3 and raw HTTP: the right S3 error code, HTTP status and XML body."""

from __future__ import annotations

from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.gateway.s3api.clients.helpers import new_bucket_name, parse_error, payload, sha256
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

Stored = tuple[str, str, bytes]  # bucket, key, data


def _client(endpoint: str, access_key: str, secret_key: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access_key,
                        aws_secret_access_key=secret_key, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1}, signature_version="s3v4",
                                      s3={"addressing_style": "path"}))


def _error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    resp = exc.value.response
    return resp["Error"]["Code"], resp["ResponseMetadata"]["HTTPStatusCode"]


def _body(s3: Any, bucket: str, key: str) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


@pytest.fixture
def stored(s3: Any, bucket: str) -> Stored:
    data = payload(4321, f"stored-{bucket}")
    s3.put_object(Bucket=bucket, Key="dir/obj", Body=data)
    return bucket, "dir/obj", data


def test_unknown_access_key(squall: SquallProcess, s3: Any, stored: Stored) -> None:
    bucket, key, data = stored
    bad = _client(squall.endpoint, "NOSUCHKEY0000000", "whatever-secret")
    for call in (lambda: bad.list_buckets(),
                 lambda: bad.get_object(Bucket=bucket, Key=key),
                 lambda: bad.put_object(Bucket=bucket, Key=key, Body=b"x"),
                 lambda: bad.delete_object(Bucket=bucket, Key=key)):
        with pytest.raises(ClientError) as err:
            call()
        assert _error(err) == ("InvalidAccessKeyId", 403)
    assert sha256(_body(s3, bucket, key)) == sha256(data)


def test_wrong_secret(squall: SquallProcess, s3: Any, stored: Stored) -> None:
    bucket, key, data = stored
    bad = _client(squall.endpoint, ACCESS_KEY, "not-the-secret")
    for call in (lambda: bad.list_buckets(),
                 lambda: bad.get_object(Bucket=bucket, Key=key),
                 lambda: bad.put_object(Bucket=bucket, Key=key, Body=b"x"),
                 lambda: bad.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key}]})):
        with pytest.raises(ClientError) as err:
            call()
        assert _error(err) == ("SignatureDoesNotMatch", 403)
    assert sha256(_body(s3, bucket, key)) == sha256(data)


@pytest.mark.parametrize("method,path", [
    ("GET", "/"),
    ("GET", "/{bucket}"),
    ("GET", "/{bucket}/{key}"),
    ("PUT", "/{bucket}/{key}"),
    ("DELETE", "/{bucket}/{key}"),
    ("DELETE", "/{bucket}"),
    ("PUT", "/{anon}"),
])
def test_anonymous_request_is_access_denied(squall: SquallProcess, s3: Any, stored: Stored,
                                            method: str, path: str) -> None:
    bucket, key, data = stored
    anon = new_bucket_name("anon")
    url = squall.endpoint + path.format(bucket=bucket, key=key, anon=anon)
    r = httpx.request(method, url, content=b"anonymous" if method == "PUT" else None)
    err = parse_error(r.status_code, r.headers, r.content)
    assert (err.status, err.code) == (403, "AccessDenied")
    assert "xml" in err.content_type
    assert err.message
    assert data not in r.content
    assert sha256(_body(s3, bucket, key)) == sha256(data)
    assert anon not in {b["Name"] for b in s3.list_buckets()["Buckets"]}


def test_anonymous_head_is_403(squall: SquallProcess, s3: Any, stored: Stored) -> None:
    bucket, key, data = stored
    r = httpx.head(f"{squall.endpoint}/{bucket}/{key}")
    assert r.status_code == 403
    assert r.content == b""
    assert sha256(_body(s3, bucket, key)) == sha256(data)


def test_missing_bucket(s3: Any) -> None:
    name = new_bucket_name("missing")
    calls = {
        "ListObjectsV2": lambda: s3.list_objects_v2(Bucket=name),
        "ListObjects": lambda: s3.list_objects(Bucket=name),
        "GetObject": lambda: s3.get_object(Bucket=name, Key="k"),
        "PutObject": lambda: s3.put_object(Bucket=name, Key="k", Body=payload(10, "m")),
        "DeleteBucket": lambda: s3.delete_bucket(Bucket=name),
        "CreateMultipartUpload": lambda: s3.create_multipart_upload(Bucket=name, Key="k"),
        "CopyObject": lambda: s3.copy_object(Bucket=name, Key="dst",
                                             CopySource={"Bucket": name, "Key": "src"}),
    }
    for op, call in calls.items():
        with pytest.raises(ClientError) as err:
            call()
        assert _error(err) == ("NoSuchBucket", 404), op
    with pytest.raises(ClientError) as err:
        s3.head_bucket(Bucket=name)
    assert _error(err) == ("404", 404)
    assert name not in {b["Name"] for b in s3.list_buckets()["Buckets"]}


def test_missing_key(s3: Any, stored: Stored) -> None:
    bucket, key, data = stored
    with pytest.raises(ClientError) as err:
        s3.get_object(Bucket=bucket, Key=key + "-absent")
    assert _error(err) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as err:
        s3.head_object(Bucket=bucket, Key=key + "-absent")
    assert _error(err) == ("404", 404)
    with pytest.raises(ClientError) as err:
        s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket,
                                                              "Key": key + "-absent"})
    assert _error(err) == ("NoSuchKey", 404)
    assert sha256(_body(s3, bucket, key)) == sha256(data)


@pytest.mark.parametrize("name", [
    "Upper-Case-Bucket", "under_score", "ab", "-leading-dash", "trailing-dash-",
    "two..dots", "169.254.5.4", "a" * 64,
])
def test_invalid_bucket_name(s3: Any, name: str) -> None:
    with pytest.raises(ClientError) as err:
        s3.create_bucket(Bucket=name)
    assert _error(err) == ("InvalidBucketName", 400)
    assert name not in {b["Name"] for b in s3.list_buckets()["Buckets"]}


def test_delete_non_empty_bucket(s3: Any, stored: Stored) -> None:
    bucket, key, data = stored
    with pytest.raises(ClientError) as err:
        s3.delete_bucket(Bucket=bucket)
    assert _error(err) == ("BucketNotEmpty", 409)
    assert sha256(_body(s3, bucket, key)) == sha256(data)
    s3.delete_object(Bucket=bucket, Key=key)
    s3.delete_bucket(Bucket=bucket)
    with pytest.raises(ClientError) as err:
        s3.list_objects_v2(Bucket=bucket)
    assert _error(err) == ("NoSuchBucket", 404)


def test_error_body_is_s3_xml(squall: SquallProcess, stored: Stored) -> None:
    """A signed request for a missing key: the XML body names the code and the resource."""
    bucket, key, _ = stored
    client = _client(squall.endpoint, ACCESS_KEY, SECRET_KEY)
    url = client.generate_presigned_url("get_object",
                                        Params={"Bucket": bucket, "Key": key + "-absent"})
    r = httpx.get(url)
    err = parse_error(r.status_code, r.headers, r.content)
    assert (err.status, err.code) == (404, "NoSuchKey")
    assert "xml" in err.content_type
    assert err.message
