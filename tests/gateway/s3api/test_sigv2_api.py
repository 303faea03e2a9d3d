"""SigV2 end to end through boto3 (``signature_version='s3'``): header auth, presigned URLs,
and a server started with ``--no-sigv2``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.gateway.s3api.test_objects_api import code_of
from tests.support.server import SquallProcess


@pytest.fixture(scope="module")
def v2(squall: SquallProcess):  # type: ignore[no-untyped-def]
    return make_client(squall.endpoint, signature_version="s3")


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    """A gateway that refuses SigV2."""
    data_dir: Path = tmp_path_factory.mktemp("strict") / "data"
    server = SquallProcess(data_dir, ["--no-sigv2", "--cache-size", "0"]).start()
    yield server
    assert server.stop() == 0, server.log()


def test_header_auth_operations(v2, s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    put = v2.put_object(Bucket=bucket, Key="dir/ké y+z", Body=b"hello", ContentType="a/b",
                        Metadata={"run": "1"}, Tagging="t=1")
    got = v2.get_object(Bucket=bucket, Key="dir/ké y+z", Range="bytes=1-3",
                        ResponseContentType="text/plain")
    assert got["Body"].read() == b"ell" and got["ContentType"] == "text/plain"
    assert v2.head_object(Bucket=bucket, Key="dir/ké y+z")["ETag"] == put["ETag"]
    assert [o["Key"] for o in v2.list_objects_v2(Bucket=bucket, Prefix="dir/")["Contents"]] \
        == ["dir/ké y+z"]
    assert v2.get_object_tagging(Bucket=bucket, Key="dir/ké y+z")["TagSet"] == [
        {"Key": "t", "Value": "1"}]
    upload = v2.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    part = v2.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=1,
                          Body=b"x" * 100)
    v2.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == b"x" * 100
    v2.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "mp"}]})
    v2.delete_object(Bucket=bucket, Key="dir/ké y+z")
    name = f"{bucket}-v2"
    v2.create_bucket(Bucket=name)
    v2.delete_bucket(Bucket=name)


def test_wrong_secret_is_signature_mismatch(squall: SquallProcess, bucket: str) -> None:
    bad = make_client(squall.endpoint, signature_version="s3")
    bad._request_signer._credentials = bad._request_signer._credentials.__class__(
        bad._request_signer._credentials.access_key, "wrong-secret")
    with pytest.raises(ClientError) as exc:
        bad.list_objects_v2(Bucket=bucket)
    assert code_of(exc) == ("SignatureDoesNotMatch", 403)


def test_presigned_get_and_put(v2, s3, bucket: str) -> None:  # type: ignore[no-untyped-def]
    put_url = v2.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "p k"},
                                        ExpiresIn=300)
    assert "AWSAccessKeyId=" in put_url and "Signature=" in put_url
    assert httpx.put(put_url, content=b"presigned body").status_code == 200
    get_url = v2.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p k"})
    response = httpx.get(get_url)
    assert (response.status_code, response.content) == (200, b"presigned body")
    # The URL covers its path and method.
    assert httpx.get(get_url.replace("p%20k", "other")).status_code == 403
    assert httpx.delete(get_url).status_code == 403
    versioned = v2.generate_presigned_url("get_object", Params={
        "Bucket": bucket, "Key": "p k", "ResponseContentType": "text/x-test"})
    assert httpx.get(versioned).headers["content-type"] == "text/x-test"


def test_presigned_expired_and_far_future(v2, bucket: str) -> None:  # type: ignore[no-untyped-def]
    v2.put_object(Bucket=bucket, Key="k", Body=b"x")
    url = v2.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"},
                                    ExpiresIn=1)
    time.sleep(2.1)
    response = httpx.get(url)
    assert response.status_code == 403 and b"<Code>AccessDenied</Code>" in response.content
    far = v2.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"},
                                    ExpiresIn=30 * 86400)
    response = httpx.get(far)
    assert response.status_code == 400
    assert b"AuthorizationQueryParametersError" in response.content


def test_no_sigv2_refuses_with_a_clear_error(strict: SquallProcess) -> None:
    v2 = make_client(strict.endpoint, signature_version="s3")
    with pytest.raises(ClientError) as exc:
        v2.list_buckets()
    assert code_of(exc) == ("InvalidRequest", 400)
    assert "Signature Version 2 is disabled" in exc.value.response["Error"]["Message"]
    url = v2.generate_presigned_url("get_object", Params={"Bucket": "b", "Key": "k"})
    response = httpx.get(url)
    assert response.status_code == 400 and b"--no-sigv2" in response.content
    make_client(strict.endpoint).list_buckets()  # SigV4 is served
