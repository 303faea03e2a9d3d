"""S3 versioning on the wire: boto3 and the aws CLI against a real gateway."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.clients.helpers import Cli, make_aws
from tests.support.server import SquallProcess


def _error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int, dict[str, str]]:
    resp = exc.value.response
    return (resp["Error"]["Code"], resp["ResponseMetadata"]["HTTPStatusCode"],
            resp["ResponseMetadata"]["HTTPHeaders"])


def _enable(s3: Any, bucket: str, status: str = "Enabled") -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})


def test_versioning_configuration(s3: Any, bucket: str) -> None:
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    _enable(s3, bucket)
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    _enable(s3, bucket, "Suspended")
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"
    for bad in ("Disabled", "enabled", ""):
        with pytest.raises(ClientError) as exc:
            _enable(s3, bucket, bad)
        assert _error(exc)[:2] == ("MalformedXML", 400)
    with pytest.raises(ClientError) as exc:
        s3.put_bucket_versioning(Bucket="no-such-bucket-v", VersioningConfiguration={
            "Status": "Enabled"})
    assert _error(exc)[:2] == ("NoSuchBucket", 404)
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Suspended"


def test_versions_markers_and_headers(s3: Any, bucket: str) -> None:
    _enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="k", Body=b"two")["VersionId"]
    assert v1 != v2
    got = s3.get_object(Bucket=bucket, Key="k", VersionId=v1)
    assert got["Body"].read() == b"one" and got["VersionId"] == v1
    assert s3.head_object(Bucket=bucket, Key="k")["VersionId"] == v2
    deleted = s3.delete_object(Bucket=bucket, Key="k")
    assert deleted["DeleteMarker"] is True
    marker = deleted["VersionId"]
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="k")
    code, status, headers = _error(exc)
    assert (code, status) == ("NoSuchKey", 404)
    assert headers["x-amz-delete-marker"] == "true" and headers["x-amz-version-id"] == marker
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="k", VersionId=marker)
    code, status, headers = _error(exc)
    assert (code, status) == ("MethodNotAllowed", 405)
    assert headers["x-amz-delete-marker"] == "true" and "last-modified" in headers
    with pytest.raises(ClientError) as exc:
        s3.head_object(Bucket=bucket, Key="k", VersionId=marker)
    assert _error(exc)[1] == 405
    listing = s3.list_object_versions(Bucket=bucket)
    assert [(v["VersionId"], v["IsLatest"]) for v in listing["Versions"]] == [
        (v2, False), (v1, False)]
    assert [(m["VersionId"], m["IsLatest"]) for m in listing["DeleteMarkers"]] == [
        (marker, True)]
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)
    undone = s3.delete_object(Bucket=bucket, Key="k", VersionId=marker)
    assert undone["DeleteMarker"] is True and undone["VersionId"] == marker
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"two"


def test_bad_version_ids(s3: Any, bucket: str) -> None:
    _enable(s3, bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    for call in (lambda: s3.get_object(Bucket=bucket, Key="k", VersionId="not-an-id"),
                 lambda: s3.delete_object(Bucket=bucket, Key="k", VersionId="not-an-id")):
        with pytest.raises(ClientError) as exc:
            call()
        assert _error(exc)[:2] == ("InvalidArgument", 400)
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="k", VersionId="0" * 24)
    assert _error(exc)[:2] == ("NoSuchVersion", 404)
    gone = s3.delete_object(Bucket=bucket, Key="k", VersionId="0" * 24)
    assert gone["VersionId"] == "0" * 24 and "DeleteMarker" not in gone
    with pytest.raises(ClientError) as exc:
        s3.list_object_versions(Bucket=bucket, VersionIdMarker="0" * 24)
    assert _error(exc)[:2] == ("InvalidArgument", 400)
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="\x7fv/forged", Body=b"x")
    assert _error(exc)[:2] == ("InvalidArgument", 400)


def test_copy_and_multipart_report_versions(s3: Any, bucket: str) -> None:
    _enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="src", Body=b"first")["VersionId"]
    s3.put_object(Bucket=bucket, Key="src", Body=b"second")
    copied = s3.copy_object(Bucket=bucket, Key="dst",
                            CopySource={"Bucket": bucket, "Key": "src", "VersionId": v1})
    assert copied["CopySourceVersionId"] == v1 and copied["VersionId"]
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == b"first"
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    part = s3.upload_part_copy(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=1,
                               CopySource={"Bucket": bucket, "Key": "src", "VersionId": v1})
    assert part["CopySourceVersionId"] == v1
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1,
                                    "ETag": part["CopyPartResult"]["ETag"]}]})
    assert done["VersionId"] == s3.head_object(Bucket=bucket, Key="mp")["VersionId"]
    marker = s3.delete_object(Bucket=bucket, Key="src")["VersionId"]
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=bucket, Key="x",
                       CopySource={"Bucket": bucket, "Key": "src", "VersionId": marker})
    assert _error(exc)[:2] == ("InvalidRequest", 400)


def test_delete_objects_with_versions(s3: Any, bucket: str) -> None:
    _enable(s3, bucket)
    v1 = s3.put_object(Bucket=bucket, Key="a", Body=b"1")["VersionId"]
    s3.put_object(Bucket=bucket, Key="a", Body=b"2")
    result = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "a", "VersionId": v1}, {"Key": "b"}, {"Key": "c", "VersionId": "bad"}]})
    deleted = {d["Key"]: d for d in result["Deleted"]}
    assert deleted["a"]["VersionId"] == v1 and "DeleteMarker" not in deleted["a"]
    assert deleted["b"]["DeleteMarker"] is True and deleted["b"]["DeleteMarkerVersionId"]
    assert [(e["Key"], e["Code"]) for e in result["Errors"]] == [("c", "InvalidArgument")]


def test_paginated_version_listing(s3: Any, bucket: str) -> None:
    _enable(s3, bucket)
    expected = []
    for key in ("x/1", "x/2", "y"):
        for i in range(3):
            expected.append((key, s3.put_object(Bucket=bucket, Key=key,
                                                Body=str(i).encode())["VersionId"]))
    expected.sort(key=lambda kv: (kv[0], [-ord(c) for c in kv[1]]))
    seen = []
    for page in s3.get_paginator("list_object_versions").paginate(
            Bucket=bucket, PaginationConfig={"PageSize": 2}):
        seen += [(v["Key"], v["VersionId"]) for v in page.get("Versions", [])]
    assert seen == expected
    grouped = s3.list_object_versions(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in grouped["CommonPrefixes"]] == ["x/"]


def test_suspended_bucket_with_the_aws_cli(squall: SquallProcess, s3: Any, bucket: str,
                                          tmp_path: Any) -> None:
    aws: Cli = make_aws(squall.endpoint, tmp_path / "aws-home")
    aws("s3api", "put-bucket-versioning", "--bucket", bucket,
        "--versioning-configuration", "Status=Enabled")
    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"v1")["VersionId"]
    aws("s3api", "put-bucket-versioning", "--bucket", bucket,
        "--versioning-configuration", "Status=Suspended")
    (tmp_path / "f").write_bytes(b"null data")
    aws("s3", "cp", str(tmp_path / "f"), f"s3://{bucket}/k")
    out = json.loads(aws("s3api", "list-object-versions", "--bucket", bucket).stdout)
    assert [(v["VersionId"], v["IsLatest"]) for v in out["Versions"]] == [
        ("null", True), (v1, False)]
    head = json.loads(aws("s3api", "head-object", "--bucket", bucket, "--key", "k",
                          "--version-id", "null").stdout)
    assert head["VersionId"] == "null" and head["ContentLength"] == 9


def test_unversioned_bucket_sends_no_version_headers(squall: SquallProcess, s3: Any,
                                                     bucket: str) -> None:
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    assert "VersionId" not in put
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"})
    response = httpx.get(url)
    assert response.status_code == 200 and "x-amz-version-id" not in response.headers
