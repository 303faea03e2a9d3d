"""Conditional and partial reads through boto3: 304 headers, ?partNumber=N, copy ranges."""

from __future__ import annotations

import hashlib

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.test_objects_api import code_of
from tests.support.signing import signed_headers

MiB = 1024 * 1024
SIZES = [5 * MiB, 5 * MiB + 7, 100]


def _multipart(s3, bucket: str, key: str, sizes: list[int]) -> list[bytes]:  # type: ignore[no-untyped-def]
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key, CacheControl="max-age=60")
    datas, parts = [], []
    for number, size in enumerate(sizes, start=1):
        data = bytes([number]) * size
        etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload["UploadId"],
                              PartNumber=number, Body=data)["ETag"]
        datas.append(data)
        parts.append({"PartNumber": number, "ETag": etag})
    s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload["UploadId"],
                                 MultipartUpload={"Parts": parts})
    return datas


def test_not_modified_carries_validators_and_caching_headers(s3, bucket: str) -> None:
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"data", CacheControl="max-age=5",
                        Expires="Wed, 21 Oct 2037 07:28:00 GMT", Metadata={"m": "1"})
    head = s3.head_object(Bucket=bucket, Key="k")
    for call in (s3.get_object, s3.head_object):
        for condition in ({"IfNoneMatch": put["ETag"]},
                          {"IfModifiedSince": head["LastModified"]}):
            with pytest.raises(ClientError) as exc:
                call(Bucket=bucket, Key="k", **condition)
            assert code_of(exc)[1] == 304
            headers = exc.value.response["ResponseMetadata"]["HTTPHeaders"]
            assert headers["etag"] == put["ETag"]
            assert headers["last-modified"] == head["ResponseMetadata"]["HTTPHeaders"][
                "last-modified"]
            assert headers["cache-control"] == "max-age=5"
            assert headers["expires"] == "Wed, 21 Oct 2037 07:28:00 GMT"
            assert "x-amz-meta-m" not in headers and "content-length" not in headers
    with pytest.raises(ClientError) as exc:  # 412 wins and carries no validators
        s3.get_object(Bucket=bucket, Key="k", IfMatch='"0000"', IfNoneMatch=put["ETag"])
    assert code_of(exc) == ("PreconditionFailed", 412)


def test_not_modified_in_versioned_bucket_names_the_version(s3, bucket: str) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    put = s3.put_object(Bucket=bucket, Key="k", Body=b"v1")
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="k", IfNoneMatch="*")
    headers = exc.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert code_of(exc)[1] == 304
    assert headers["x-amz-version-id"] == put["VersionId"]
    assert headers["etag"] == put["ETag"]


def test_get_and_head_part_number_of_multipart_object(s3, bucket: str) -> None:
    datas = _multipart(s3, bucket, "mp", SIZES)
    whole = s3.head_object(Bucket=bucket, Key="mp")
    assert "PartsCount" not in whole
    offset = 0
    for number, data in enumerate(datas, start=1):
        got = s3.get_object(Bucket=bucket, Key="mp", PartNumber=number)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert got["PartsCount"] == 3
        assert got["ContentLength"] == len(data)
        assert got["ContentRange"] == \
            f"bytes {offset}-{offset + len(data) - 1}/{sum(SIZES)}"
        assert got["ETag"] == whole["ETag"]
        assert hashlib.md5(got["Body"].read()).digest() == hashlib.md5(data).digest()
        head = s3.head_object(Bucket=bucket, Key="mp", PartNumber=number)
        assert head["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert (head["PartsCount"], head["ContentLength"]) == (3, len(data))
        assert head["ContentRange"] == got["ContentRange"]
        offset += len(data)
    for call in (s3.get_object, s3.head_object):
        with pytest.raises(ClientError) as exc:
            call(Bucket=bucket, Key="mp", PartNumber=4)
        assert code_of(exc)[1] == 400
        if call is s3.get_object:
            assert code_of(exc) == ("InvalidPart", 400)


def test_part_number_survives_copy_and_tagging(s3, bucket: str) -> None:
    datas = _multipart(s3, bucket, "mp", SIZES)
    s3.put_object_tagging(Bucket=bucket, Key="mp", Tagging={"TagSet": [
        {"Key": "a", "Value": "1"}]})
    s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "mp"},
                   MetadataDirective="REPLACE", Metadata={"x": "y"})
    # A copy within one process keeps the source's parts; one streamed between the
    # workers of --workers N is a new single-part object, as every copy is on AWS.
    kept = s3.head_object(Bucket=bucket, Key="copy")["ETag"].endswith('-3"')
    for key in ("mp", "copy") if kept else ("mp",):
        got = s3.get_object(Bucket=bucket, Key=key, PartNumber=3)
        assert got["Body"].read() == datas[2]
        assert got["PartsCount"] == 3
    head = s3.head_object(Bucket=bucket, Key="copy")
    assert head["Metadata"] == {"x": "y"}  # the recorded layout is never shown


def test_part_number_of_single_part_object(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="one", Body=b"0123456789")
    got = s3.get_object(Bucket=bucket, Key="one", PartNumber=1)
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert got["ContentRange"] == "bytes 0-9/10"
    assert got["Body"].read() == b"0123456789"
    assert "PartsCount" not in got
    head = s3.head_object(Bucket=bucket, Key="one", PartNumber=1)
    assert (head["ContentLength"], head["ContentRange"]) == (10, "bytes 0-9/10")
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="one", PartNumber=2)
    assert code_of(exc) == ("InvalidPart", 400)
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    empty = s3.get_object(Bucket=bucket, Key="empty", PartNumber=1)
    assert empty["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert empty["Body"].read() == b""


def test_part_number_bad_inputs(s3, squall, bucket: str) -> None:  # type: ignore[no-untyped-def]
    s3.put_object(Bucket=bucket, Key="one", Body=b"0123456789")
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="one", PartNumber=1, Range="bytes=0-1")
    assert code_of(exc) == ("InvalidRequest", 400)
    for raw in ("0", "10001", "x", "-1", ""):
        url = f"{squall.endpoint}/{bucket}/one?partNumber={raw}"
        response = httpx.get(url, headers=signed_headers("GET", url))
        assert response.status_code == 400, raw
        assert b"<Code>InvalidArgument</Code>" in response.content


def test_part_number_with_version_and_conditions(s3, bucket: str) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    datas = _multipart(s3, bucket, "mp", SIZES)
    first = s3.head_object(Bucket=bucket, Key="mp")
    s3.put_object(Bucket=bucket, Key="mp", Body=b"replaced")
    got = s3.get_object(Bucket=bucket, Key="mp", PartNumber=2,
                        VersionId=first["VersionId"], IfMatch=first["ETag"])
    assert got["Body"].read() == datas[1]
    assert got["VersionId"] == first["VersionId"]
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="mp", PartNumber=2, IfMatch=first["ETag"])
    assert code_of(exc) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="mp", PartNumber=1,
                      VersionId=first["VersionId"], IfNoneMatch=first["ETag"])
    assert code_of(exc)[1] == 304


def test_upload_part_copy_range_past_the_source_end(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="src", Body=b"0123456789")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    source = {"Bucket": bucket, "Key": "src"}
    for bad in ("bytes=0-10", "bytes=5-20", "bytes=10-12"):
        with pytest.raises(ClientError) as exc:
            s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=upload, PartNumber=1,
                                CopySource=source, CopySourceRange=bad)
        assert code_of(exc) == ("InvalidRange", 416), bad
    assert s3.list_parts(Bucket=bucket, Key="dst", UploadId=upload).get("Parts", []) == []
    part = s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=upload, PartNumber=1,
                               CopySource=source, CopySourceRange="bytes=2-9")
    s3.complete_multipart_upload(Bucket=bucket, Key="dst", UploadId=upload,
                                 MultipartUpload={"Parts": [
                                     {"PartNumber": 1,
                                      "ETag": part["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == b"23456789"
