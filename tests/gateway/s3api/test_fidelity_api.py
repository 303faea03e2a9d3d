"""S3 answers that current SDKs rely on, through boto3 against a real gateway (the cache
tier): a retried CompleteMultipartUpload, DeleteBucket of a bucket holding only uploads,
the checksums of current SDKs, Content-MD5 of request documents, If-None-Match with ETags
on writes and ExpectedBucketOwner. (Every other route: tests/gateway/test_fidelity_e2e.py.)"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.test_objects_api import code_of
from tests.support.server import SquallProcess
from tests.support.signing import send

BODY = b"checksums of current SDKs"
#: every algorithm the SDKs list, with the value of BODY (botocore's classes compute the
#: xxHash and SHA-512 ones; MD5 is hashlib's)
NEW = ("SHA512", "MD5", "XXHASH64", "XXHASH3", "XXHASH128")
SIZES = {"CRC32": 4, "CRC32C": 4, "CRC64NVME": 8, "SHA1": 20, "SHA256": 32, "SHA512": 64,
         "MD5": 16, "XXHASH64": 8, "XXHASH3": 8, "XXHASH128": 16}


def value_of(algorithm: str, data: bytes) -> str:
    """The base64 checksum of ``data`` as an SDK computes it."""
    from botocore.httpchecksum import _CHECKSUM_CLS  # type: ignore[attr-defined]
    if algorithm == "MD5":
        return base64.b64encode(hashlib.md5(data).digest()).decode()
    checker = _CHECKSUM_CLS[algorithm.lower()]()
    checker.update(data)
    return str(checker.b64digest())


def wrong_of(algorithm: str) -> str:
    """A value of the right form that matches nothing."""
    return base64.b64encode(b"\1" * SIZES[algorithm]).decode()


def retried_complete(s3: Any, bucket: str, key: str) -> None:
    """Complete an upload, then complete it again: the same answer; then the cases that
    stay NoSuchUpload."""
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1,
                          Body=b"part")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
    first = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                         MultipartUpload=parts)
    again = s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                         MultipartUpload=parts)
    assert (again["ETag"], again["Key"]) == (first["ETag"], first["Key"])
    assert again.get("ChecksumCRC32") == first.get("ChecksumCRC32")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"part"
    bad = [(upload_id, {"Parts": [{"PartNumber": 1, "ETag": '"' + "0" * 32 + '"'}]}),
           ("not-an-upload", parts)]
    for other_id, other_parts in bad:
        with pytest.raises(ClientError) as exc:
            s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=other_id,
                                         MultipartUpload=other_parts)
        assert code_of(exc) == ("NoSuchUpload", 404)
    s3.put_object(Bucket=bucket, Key=key, Body=b"overwritten")  # no longer its result
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id,
                                     MultipartUpload=parts)
    assert code_of(exc) == ("NoSuchUpload", 404)


def test_a_retried_complete_answers_the_first_result(s3: Any, bucket: str) -> None:
    retried_complete(s3, bucket, "retried")


def test_a_retried_complete_in_a_versioned_bucket(s3: Any, bucket: str) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="v")["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key="v", UploadId=upload_id, PartNumber=1,
                          Body=b"v1")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
    first = s3.complete_multipart_upload(Bucket=bucket, Key="v", UploadId=upload_id,
                                         MultipartUpload=parts)
    again = s3.complete_multipart_upload(Bucket=bucket, Key="v", UploadId=upload_id,
                                         MultipartUpload=parts)
    assert (again["ETag"], again["VersionId"]) == (first["ETag"], first["VersionId"])
    versions = s3.list_object_versions(Bucket=bucket)["Versions"]
    assert len(versions) == 1


def delete_bucket_with_uploads(s3: Any, bucket: str, keys: list[str]) -> None:
    """A bucket whose only content is uploads in progress is deleted with them."""
    for key in keys:
        upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=b"x")
    s3.delete_bucket(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.head_bucket(Bucket=bucket)
    assert code_of(exc)[1] == 404
    s3.create_bucket(Bucket=bucket)  # a new bucket of that name has none of them
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_delete_bucket_with_only_uploads(s3: Any, bucket: str) -> None:
    delete_bucket_with_uploads(s3, bucket, ["a", "b/c"])


def test_delete_bucket_with_objects_and_uploads_keeps_both(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="o", Body=b"o")
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="u")["UploadId"]
    with pytest.raises(ClientError) as exc:
        s3.delete_bucket(Bucket=bucket)
    assert code_of(exc) == ("BucketNotEmpty", 409)
    uploads = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [u["UploadId"] for u in uploads] == [upload_id]


def checksums_of_every_algorithm(s3: Any, bucket: str, key: str) -> None:
    """Each algorithm: the right value is stored and answered, a wrong one is BadDigest
    and stores nothing."""
    for algorithm in SIZES:
        field = f"Checksum{algorithm}"
        name = f"{key}-{algorithm}"
        with pytest.raises(ClientError) as exc:
            s3.put_object(Bucket=bucket, Key=name, Body=BODY,
                          **{field: wrong_of(algorithm)})
        assert code_of(exc) == ("BadDigest", 400), algorithm
        with pytest.raises(ClientError):
            s3.head_object(Bucket=bucket, Key=name)
        right = value_of(algorithm, BODY)
        put = s3.put_object(Bucket=bucket, Key=name, Body=BODY, **{field: right})
        assert put[field] == right
        head = s3.head_object(Bucket=bucket, Key=name, ChecksumMode="ENABLED")
        assert (head[field], head["ChecksumType"]) == (right, "FULL_OBJECT")


def test_checksums_of_every_algorithm(s3: Any, bucket: str) -> None:
    checksums_of_every_algorithm(s3, bucket, "k")


@pytest.mark.parametrize("algorithm", NEW)
def test_new_algorithms_from_the_sdk_and_in_multipart_uploads(s3: Any, bucket: str,
                                                              algorithm: str) -> None:
    field = f"Checksum{algorithm}"
    if algorithm != "MD5":  # botocore computes it (a trailer of an aws-chunked body)
        put = s3.put_object(Bucket=bucket, Key="sdk", Body=BODY, ChecksumAlgorithm=algorithm)
        assert put[field] == value_of(algorithm, BODY)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="m",
                                           ChecksumAlgorithm=algorithm)["UploadId"]
    with pytest.raises(ClientError) as exc:
        s3.upload_part(Bucket=bucket, Key="m", UploadId=upload_id, PartNumber=1, Body=BODY,
                       **{field: wrong_of(algorithm)})
    assert code_of(exc) == ("BadDigest", 400)
    part = s3.upload_part(Bucket=bucket, Key="m", UploadId=upload_id, PartNumber=1,
                          Body=BODY, **{field: value_of(algorithm, BODY)})
    assert part[field] == value_of(algorithm, BODY)
    listed = s3.list_parts(Bucket=bucket, Key="m", UploadId=upload_id)
    assert (listed["ChecksumAlgorithm"], listed["ChecksumType"]) == (algorithm, "COMPOSITE")
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="m", UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"],
                                    field: part[field]}]})
    composite = value_of(algorithm, base64.b64decode(part[field])) + "-1"
    assert (done[field], done["ChecksumType"]) == (composite, "COMPOSITE")
    head = s3.head_object(Bucket=bucket, Key="m", ChecksumMode="ENABLED")
    attrs = s3.get_object_attributes(Bucket=bucket, Key="m", ObjectAttributes=["Checksum"])
    assert (head[field], head["ChecksumType"]) == (composite, "COMPOSITE")
    assert attrs["Checksum"] == {field: composite, "ChecksumType": "COMPOSITE"}


def test_an_unknown_checksum_header_is_refused(squall: SquallProcess, bucket: str) -> None:
    url = f"{squall.endpoint}/{bucket}/k"
    res = send("PUT", url, BODY, {"x-amz-checksum-sha3": "AAAA"})
    assert res.status_code == 400 and b"<Code>InvalidRequest</Code>" in res.content
    res = send("PUT", url, BODY, {"x-amz-checksum-xxhash64": "bad"})
    assert res.status_code == 400 and b"<Code>InvalidRequest</Code>" in res.content


def _md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def test_content_md5_of_documents_is_checked(s3: Any, squall: SquallProcess,
                                             bucket: str) -> None:
    for key in ("keep", "victim"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    url = f"{squall.endpoint}/{bucket}"
    meant = b"<Delete><Object><Key>victim</Key></Object></Delete>"
    forged = b"<Delete><Object><Key>keep</Key></Object></Delete>"
    # The list of keys swapped under the Content-MD5 of another (the body unsigned).
    res = send("POST", f"{url}?delete=", forged, {"content-md5": _md5(meant)},
               payload_hash="UNSIGNED-PAYLOAD")
    assert res.status_code == 400 and b"<Code>BadDigest</Code>" in res.content
    tagging = b"<Tagging><TagSet><Tag><Key>a</Key><Value>b</Value></Tag></TagSet></Tagging>"
    res = send("PUT", f"{url}/keep?tagging=", tagging, {"content-md5": _md5(b"other")},
               payload_hash="UNSIGNED-PAYLOAD")
    assert res.status_code == 400 and b"<Code>BadDigest</Code>" in res.content
    res = send("PUT", f"{url}?versioning=",
               b"<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>",
               {"content-md5": _md5(b"other")}, payload_hash="UNSIGNED-PAYLOAD")
    assert res.status_code == 400 and b"<Code>BadDigest</Code>" in res.content
    res = send("PUT", f"{url}?policy=", b'{"Version": "2012-10-17", "Statement": []}',
               {"content-md5": _md5(b"other")}, payload_hash="UNSIGNED-PAYLOAD")
    assert res.status_code == 400 and b"<Code>BadDigest</Code>" in res.content
    res = send("POST", f"{url}?delete=", meant, {"content-md5": "not-md5"},
               payload_hash="UNSIGNED-PAYLOAD")
    assert res.status_code == 400 and b"<Code>InvalidDigest</Code>" in res.content
    assert {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]} == \
        {"keep", "victim"}
    assert s3.get_object_tagging(Bucket=bucket, Key="keep")["TagSet"] == []
    res = send("POST", f"{url}?delete=", meant, {"content-md5": _md5(meant)},
               payload_hash="UNSIGNED-PAYLOAD")
    assert res.status_code == 200, res.text
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["keep"]


def test_expected_bucket_owner(s3: Any, squall: SquallProcess, bucket: str) -> None:
    owner = s3.list_buckets()["Owner"]["ID"]
    s3.put_object(Bucket=bucket, Key="k", Body=b"x", ExpectedBucketOwner=owner)
    s3.list_objects_v2(Bucket=bucket, ExpectedBucketOwner=owner)
    other = "0" * 64
    calls = [lambda: s3.put_object(Bucket=bucket, Key="k", Body=b"y",
                                   ExpectedBucketOwner=other),
             lambda: s3.get_object(Bucket=bucket, Key="k", ExpectedBucketOwner=other),
             lambda: s3.list_objects_v2(Bucket=bucket, ExpectedBucketOwner=other),
             lambda: s3.get_bucket_versioning(Bucket=bucket, ExpectedBucketOwner=other),
             lambda: s3.delete_object(Bucket=bucket, Key="k", ExpectedBucketOwner=other),
             lambda: s3.copy_object(Bucket=bucket, Key="c", CopySource=f"{bucket}/k",
                                    ExpectedSourceBucketOwner=other)]
    for call in calls:
        with pytest.raises(ClientError) as exc:
            call()
        assert code_of(exc) == ("AccessDenied", 403)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    s3.copy_object(Bucket=bucket, Key="c", CopySource=f"{bucket}/k",
                   ExpectedSourceBucketOwner=owner, ExpectedBucketOwner=owner)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="m")["UploadId"]
    with pytest.raises(ClientError) as exc:
        s3.upload_part_copy(Bucket=bucket, Key="m", UploadId=upload_id, PartNumber=1,
                            CopySource=f"{bucket}/k", ExpectedSourceBucketOwner=other)
    assert code_of(exc) == ("AccessDenied", 403)
    s3.upload_part_copy(Bucket=bucket, Key="m", UploadId=upload_id, PartNumber=1,
                        CopySource=f"{bucket}/k", ExpectedSourceBucketOwner=owner)
