"""PutObject/GetObject/HeadObject/DeleteObject/CopyObject/tagging through boto3."""

from __future__ import annotations

import base64
import hashlib
import os
import time

import pytest
from botocore.exceptions import ClientError

from tests.support.signing import send


def code_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    err = exc.value.response
    return err["Error"]["Code"], err["ResponseMetadata"]["HTTPStatusCode"]


def test_put_get_round_trip_with_metadata(s3, bucket: str) -> None:
    body = os.urandom(3 * 1024 * 1024 + 17)
    put = s3.put_object(Bucket=bucket, Key="dir/obj.bin", Body=body,
                        ContentType="application/x-test", ContentEncoding="identity",
                        ContentDisposition="attachment", ContentLanguage="en",
                        CacheControl="no-cache", Metadata={"run": "42", "Step": "7"})
    assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
    got = s3.get_object(Bucket=bucket, Key="dir/obj.bin")
    assert got["Body"].read() == body
    assert got["ContentType"] == "application/x-test"
    assert got["ContentDisposition"] == "attachment"
    assert got["ContentLanguage"] == "en"
    assert got["CacheControl"] == "no-cache"
    assert got["Metadata"] == {"run": "42", "step": "7"}
    assert got["ContentLength"] == len(body)
    head = s3.head_object(Bucket=bucket, Key="dir/obj.bin")
    assert head["ETag"] == put["ETag"]
    assert head["ContentLength"] == len(body)


def test_empty_object_and_default_content_type(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    got = s3.get_object(Bucket=bucket, Key="empty")
    assert got["Body"].read() == b""
    assert got["ETag"] == '"d41d8cd98f00b204e9800998ecf8427e"'
    assert got["ContentType"] == "binary/octet-stream"


def test_overwrite_and_delete(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="k", Body=b"one")
    s3.put_object(Bucket=bucket, Key="k", Body=b"two")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"two"
    assert s3.delete_object(Bucket=bucket, Key="k")["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="k")
    assert code_of(exc) == ("NoSuchKey", 404)
    # Deleting a missing key succeeds, as in S3.
    s3.delete_object(Bucket=bucket, Key="k")


def test_head_missing_is_404(s3, bucket: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.head_object(Bucket=bucket, Key="nope")
    assert code_of(exc) == ("404", 404)


@pytest.mark.parametrize("header,expected", [
    ("bytes=0-9", (0, 9)), ("bytes=10-", (10, 99)), ("bytes=-5", (95, 99)),
    ("bytes=90-1000", (90, 99)),
])
def test_range_get(s3, bucket: str, header: str, expected: tuple[int, int]) -> None:
    body = bytes(range(100))
    s3.put_object(Bucket=bucket, Key="r", Body=body)
    got = s3.get_object(Bucket=bucket, Key="r", Range=header)
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert got["ContentRange"] == f"bytes {expected[0]}-{expected[1]}/100"
    assert got["Body"].read() == body[expected[0]: expected[1] + 1]


def test_unsatisfiable_range_is_416(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="r", Body=b"abc")
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="r", Range="bytes=10-20")
    assert code_of(exc) == ("InvalidRange", 416)


def test_invalid_range_syntax_returns_whole_object(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="r", Body=b"abc")
    got = s3.get_object(Bucket=bucket, Key="r", Range="bytes=5-1")
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert got["Body"].read() == b"abc"


def test_conditional_get(s3, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="c", Body=b"data")["ETag"]
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == b"data"
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="c", IfMatch='"0000"')
    assert code_of(exc) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    future = time.time() + 3600
    past = time.time() - 3600
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=future)
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    with pytest.raises(ClientError) as exc:
        s3.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=past)
    assert code_of(exc) == ("PreconditionFailed", 412)
    # If-Match true wins over a false If-Unmodified-Since.
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag,
                         IfUnmodifiedSince=past)["Body"].read() == b"data"
    with pytest.raises(ClientError) as exc:
        s3.head_object(Bucket=bucket, Key="c", IfMatch='"0000"')
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412


def test_conditional_put(s3, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="p", Body=b"v1", IfNoneMatch="*")["ETag"]
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="p", Body=b"v2", IfNoneMatch="*")
    assert code_of(exc) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="p", Body=b"v2", IfMatch='"ffff"')
    assert code_of(exc) == ("PreconditionFailed", 412)
    s3.put_object(Bucket=bucket, Key="p", Body=b"v3", IfMatch=etag)
    assert s3.get_object(Bucket=bucket, Key="p")["Body"].read() == b"v3"


def test_content_md5_verified(s3, bucket: str) -> None:
    good = base64.b64encode(hashlib.md5(b"payload").digest()).decode()
    s3.put_object(Bucket=bucket, Key="m", Body=b"payload", ContentMD5=good)
    bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="m", Body=b"changed", ContentMD5=bad)
    assert code_of(exc) == ("BadDigest", 400)
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == b"payload"
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="m", Body=b"x", ContentMD5="not-base64!")
    assert code_of(exc) == ("InvalidDigest", 400)


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "SHA1", "SHA256", "CRC64NVME"])
def test_checksums_stored_and_returned(s3, bucket: str, algorithm: str) -> None:
    body = os.urandom(70_000)
    put = s3.put_object(Bucket=bucket, Key="sum", Body=body, ChecksumAlgorithm=algorithm)
    value = put[f"Checksum{algorithm}"]
    got = s3.get_object(Bucket=bucket, Key="sum", ChecksumMode="ENABLED")
    assert got["Body"].read() == body
    assert got[f"Checksum{algorithm}"] == value


def test_copy_object_directives(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="src", Body=b"copy me", ContentType="text/plain",
                  Metadata={"a": "1"}, Tagging="t=1")
    res = s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert res["CopyObjectResult"]["ETag"] == f'"{hashlib.md5(b"copy me").hexdigest()}"'
    dst = s3.get_object(Bucket=bucket, Key="dst")
    assert dst["Body"].read() == b"copy me"
    assert dst["Metadata"] == {"a": "1"} and dst["ContentType"] == "text/plain"
    assert s3.get_object_tagging(Bucket=bucket, Key="dst")["TagSet"] == [
        {"Key": "t", "Value": "1"}]
    s3.copy_object(Bucket=bucket, Key="dst2", CopySource=f"{bucket}/src",
                   MetadataDirective="REPLACE", ContentType="application/json",
                   Metadata={"b": "2"})
    dst2 = s3.head_object(Bucket=bucket, Key="dst2")
    assert dst2["Metadata"] == {"b": "2"} and dst2["ContentType"] == "application/json"
    # Copy onto itself with REPLACE is how metadata is changed in place.
    s3.copy_object(Bucket=bucket, Key="src", CopySource=f"{bucket}/src",
                   MetadataDirective="REPLACE", Metadata={"c": "3"})
    assert s3.head_object(Bucket=bucket, Key="src")["Metadata"] == {"c": "3"}


def test_copy_object_bad_inputs(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="src", Body=b"x")
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=bucket, Key="src", CopySource=f"{bucket}/src")
    assert code_of(exc) == ("InvalidRequest", 400)
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=bucket, Key="d", CopySource=f"{bucket}/missing")
    assert code_of(exc) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=bucket, Key="d", CopySource=f"{bucket}/src",
                       CopySourceIfMatch='"0000"')
    assert code_of(exc) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as exc:
        s3.copy_object(Bucket=bucket, Key="d", CopySource=f"{bucket}/src",
                       CopySourceIfModifiedSince=time.time() + 3600)
    assert code_of(exc) == ("PreconditionFailed", 412)


def test_tagging(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="t", Body=b"x", Tagging="a=1&b=two")
    assert s3.head_object(Bucket=bucket, Key="t")["ResponseMetadata"]["HTTPHeaders"][
        "x-amz-tagging-count"] == "2"
    s3.put_object_tagging(Bucket=bucket, Key="t", Tagging={"TagSet": [
        {"Key": "k", "Value": "v"}]})
    assert s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"] == [
        {"Key": "k", "Value": "v"}]
    s3.delete_object_tagging(Bucket=bucket, Key="t")
    assert s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"] == []
    assert s3.get_object(Bucket=bucket, Key="t")["Body"].read() == b"x"
    too_many = [{"Key": f"k{i}", "Value": "v"} for i in range(11)]
    with pytest.raises(ClientError) as exc:
        s3.put_object_tagging(Bucket=bucket, Key="t", Tagging={"TagSet": too_many})
    assert code_of(exc) == ("InvalidTag", 400)
    with pytest.raises(ClientError) as exc:
        s3.get_object_tagging(Bucket=bucket, Key="missing")
    assert code_of(exc) == ("NoSuchKey", 404)


def test_bogus_storage_class_and_non_utf8_tags_are_refused(squall, s3, bucket: str) -> None:
    """S3's answers: 400 InvalidStorageClass, 400 InvalidTag; nothing is stored."""
    refused = [
        lambda: s3.put_object(Bucket=bucket, Key="sc", Body=b"x", StorageClass="BOGUS"),
        lambda: s3.create_multipart_upload(Bucket=bucket, Key="sc", StorageClass="BOGUS"),
        lambda: s3.copy_object(Bucket=bucket, Key="sc", StorageClass="BOGUS",
                               CopySource={"Bucket": bucket, "Key": "src"}),
    ]
    s3.put_object(Bucket=bucket, Key="src", Body=b"x", StorageClass="STANDARD_IA")
    for call in refused:
        with pytest.raises(ClientError) as exc:
            call()
        assert code_of(exc) == ("InvalidStorageClass", 400)
    for call in (lambda: s3.put_object(Bucket=bucket, Key="tag", Body=b"x",
                                       Tagging="k=%ff%fe"),
                 lambda: s3.create_multipart_upload(Bucket=bucket, Key="tag",
                                                    Tagging="k=%ff%fe")):
        with pytest.raises(ClientError) as exc:
            call()
        assert code_of(exc) == ("InvalidTag", 400)
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    assert [o["Key"] for o in listed] == ["src"]
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    # a PutObjectTagging document whose value is not UTF-8
    url = f"{squall.endpoint}/{bucket}/src?tagging"
    document = (b"<Tagging><TagSet><Tag><Key>k</Key><Value>\xff\xfe</Value></Tag></TagSet>"
                b"</Tagging>")
    answer = send("PUT", url, document)
    assert answer.status_code == 400 and b"<Code>InvalidTag</Code>" in answer.content
    assert s3.get_object_tagging(Bucket=bucket, Key="src")["TagSet"] == []


@pytest.mark.parametrize("key", ["a//b", "trail/", "../escape", "a/../../b", "./x", "..",
                                 "x" * 300, "sp ace/ü/€", "/leading", "%2F/encoded"])
def test_awkward_keys_round_trip(s3, bucket: str, key: str) -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == key.encode()
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == [key]
    s3.delete_object(Bucket=bucket, Key=key)
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_object_and_prefix_of_same_name(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="d", Body=b"file")
    s3.put_object(Bucket=bucket, Key="d/x", Body=b"child")
    assert s3.get_object(Bucket=bucket, Key="d")["Body"].read() == b"file"
    assert s3.get_object(Bucket=bucket, Key="d/x")["Body"].read() == b"child"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["d", "d/x"]


def test_key_too_long(s3, bucket: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="k" * 1025, Body=b"x")
    assert code_of(exc) == ("KeyTooLongError", 400)


def test_metadata_too_large(s3, bucket: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="m", Body=b"x", Metadata={"big": "v" * 3000})
    assert code_of(exc) == ("MetadataTooLarge", 400)


def test_response_header_overrides(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="o", Body=b"x")
    got = s3.get_object(Bucket=bucket, Key="o", ResponseContentType="text/csv",
                        ResponseContentDisposition="inline")
    assert got["ContentType"] == "text/csv" and got["ContentDisposition"] == "inline"


def test_object_tags_returned_sorted(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="t", Body=b"x", Tagging="zeta=1&alpha=2&mid=3")
    keys = [t["Key"] for t in s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"]]
    assert keys == ["alpha", "mid", "zeta"]
    s3.put_object_tagging(Bucket=bucket, Key="t", Tagging={"TagSet": [
        {"Key": "b", "Value": "1"}, {"Key": "a", "Value": "2"}]})
    keys = [t["Key"] for t in s3.get_object_tagging(Bucket=bucket, Key="t")["TagSet"]]
    assert keys == ["a", "b"]


def test_conditional_put_edge_cases(s3, bucket: str) -> None:
    with pytest.raises(ClientError) as exc:  # If-Match needs an object to match
        s3.put_object(Bucket=bucket, Key="absent", Body=b"x", IfMatch='"0000"')
    assert code_of(exc) == ("NoSuchKey", 404)
    etag = s3.put_object(Bucket=bucket, Key="p", Body=b"v1")["ETag"]
    # If-None-Match with ETags (RFC 9110): 412 when one names the current object.
    for value in (etag, etag.strip('"'), f'"0000", {etag}', f'W/{etag}'):
        with pytest.raises(ClientError) as exc:
            s3.put_object(Bucket=bucket, Key="p", Body=b"v2", IfNoneMatch=value)
        assert code_of(exc) == ("PreconditionFailed", 412)
    assert s3.get_object(Bucket=bucket, Key="p")["Body"].read() == b"v1"
    s3.put_object(Bucket=bucket, Key="p", Body=b"v2", IfNoneMatch='"0000", "1111"')
    s3.put_object(Bucket=bucket, Key="new", Body=b"n", IfNoneMatch=etag)
    assert s3.get_object(Bucket=bucket, Key="p")["Body"].read() == b"v2"
    with pytest.raises(ClientError) as exc:  # If-Match lists: none names the object
        s3.put_object(Bucket=bucket, Key="p", Body=b"v3", IfMatch=f'"0000", {etag}')
    assert code_of(exc) == ("PreconditionFailed", 412)
    current = s3.head_object(Bucket=bucket, Key="p")["ETag"]
    s3.put_object(Bucket=bucket, Key="p", Body=b"v3", IfMatch=f'"0000", {current}')
    assert s3.get_object(Bucket=bucket, Key="p")["Body"].read() == b"v3"
