"""Multipart uploads through boto3."""

from __future__ import annotations

import hashlib
import os

import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.test_objects_api import code_of

MiB = 1024 * 1024


def _upload(s3, bucket: str, key: str, parts: list[bytes]) -> tuple[str, list[dict]]:
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    done = []
    for number, data in enumerate(parts, start=1):
        etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number,
                              Body=data)["ETag"]
        done.append({"PartNumber": number, "ETag": etag})
    return upload_id, done


def test_multipart_round_trip_and_etag(s3, bucket: str) -> None:
    parts = [os.urandom(5 * MiB), os.urandom(5 * MiB), os.urandom(1234)]
    upload_id, done = _upload(s3, bucket, "big", parts)
    listed = s3.list_parts(Bucket=bucket, Key="big", UploadId=upload_id)["Parts"]
    assert [p["PartNumber"] for p in listed] == [1, 2, 3]
    assert [p["Size"] for p in listed] == [len(p) for p in parts]
    res = s3.complete_multipart_upload(Bucket=bucket, Key="big", UploadId=upload_id,
                                       MultipartUpload={"Parts": done})
    md5s = b"".join(hashlib.md5(p).digest() for p in parts)
    assert res["ETag"] == f'"{hashlib.md5(md5s).hexdigest()}-3"'
    body = s3.get_object(Bucket=bucket, Key="big")["Body"].read()
    assert body == b"".join(parts)
    with pytest.raises(ClientError) as exc:
        s3.list_parts(Bucket=bucket, Key="big", UploadId=upload_id)
    assert code_of(exc) == ("NoSuchUpload", 404)


def test_complete_errors(s3, bucket: str) -> None:
    upload_id, done = _upload(s3, bucket, "k", [b"small", b"tail"])
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                     MultipartUpload={"Parts": done})
    assert code_of(exc) == ("EntityTooSmall", 400)
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                     MultipartUpload={"Parts": list(reversed(done))})
    assert code_of(exc) == ("InvalidPartOrder", 400)
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                     MultipartUpload={"Parts": [
                                         {"PartNumber": 1, "ETag": '"00000000"'}]})
    assert code_of(exc) == ("InvalidPart", 400)
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                     MultipartUpload={"Parts": [
                                         {"PartNumber": 9, "ETag": done[0]["ETag"]}]})
    assert code_of(exc) == ("InvalidPart", 400)
    # A single small part is a valid upload.
    s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                 MultipartUpload={"Parts": done[:1]})
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"small"


def test_upload_part_bad_inputs(s3, bucket: str) -> None:
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
    for number in (0, 10001):
        with pytest.raises(ClientError) as exc:
            s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=number,
                           Body=b"x")
        assert code_of(exc) == ("InvalidArgument", 400)
    with pytest.raises(ClientError) as exc:
        s3.upload_part(Bucket=bucket, Key="k", UploadId="nope", PartNumber=1, Body=b"x")
    assert code_of(exc) == ("NoSuchUpload", 404)
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                     MultipartUpload={"Parts": []})
    assert code_of(exc)[1] == 400


def test_abort_and_list_uploads(s3, bucket: str) -> None:
    ids = {key: s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
           for key in ["x/1", "x/2", "y"]}
    listed = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [u["Key"] for u in listed] == ["x/1", "x/2", "y"]
    grouped = s3.list_multipart_uploads(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in grouped["CommonPrefixes"]] == ["x/"]
    assert [u["Key"] for u in grouped["Uploads"]] == ["y"]
    page = s3.list_multipart_uploads(Bucket=bucket, MaxUploads=1)
    assert page["IsTruncated"] and page["NextKeyMarker"] == "x/1"
    s3.put_object(Bucket=bucket, Key="keep", Body=b"x")
    with pytest.raises(ClientError) as exc:  # an object: the uploads stay too
        s3.delete_bucket(Bucket=bucket)
    assert code_of(exc) == ("BucketNotEmpty", 409)
    assert len(s3.list_multipart_uploads(Bucket=bucket)["Uploads"]) == 3
    for key, upload_id in ids.items():
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.abort_multipart_upload(Bucket=bucket, Key="y", UploadId=ids["y"])
    assert code_of(exc) == ("NoSuchUpload", 404)


def test_upload_part_copy_with_range(s3, bucket: str) -> None:
    source = os.urandom(6 * MiB)
    s3.put_object(Bucket=bucket, Key="src", Body=source)
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key="dst")["UploadId"]
    first = s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=upload_id, PartNumber=1,
                                CopySource=f"{bucket}/src",
                                CopySourceRange=f"bytes=0-{5 * MiB - 1}")
    second = s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=upload_id, PartNumber=2,
                                 CopySource=f"{bucket}/src",
                                 CopySourceRange=f"bytes={5 * MiB}-{6 * MiB - 1}")
    s3.complete_multipart_upload(Bucket=bucket, Key="dst", UploadId=upload_id,
                                 MultipartUpload={"Parts": [
                                     {"PartNumber": 1, "ETag": first["CopyPartResult"]["ETag"]},
                                     {"PartNumber": 2,
                                      "ETag": second["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="dst")["Body"].read() == source
    with pytest.raises(ClientError) as exc:
        s3.upload_part_copy(Bucket=bucket, Key="dst", UploadId=upload_id, PartNumber=1,
                            CopySource=f"{bucket}/src", CopySourceRange="bytes=abc")
    assert code_of(exc)[1] in (400, 404)


def test_replacing_a_part(s3, bucket: str) -> None:
    upload_id, _ = _upload(s3, bucket, "k", [b"first"])
    etag = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1,
                          Body=b"second")["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload_id,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"second"


def _upload_one_part(s3, bucket: str, key: str) -> tuple[str, list]:  # type: ignore[no-untyped-def]
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"mp")
    return upload, [{"PartNumber": 1, "ETag": part["ETag"]}]


def test_conditional_complete(s3, bucket: str) -> None:
    upload, parts = _upload_one_part(s3, bucket, "c")
    done = s3.complete_multipart_upload(Bucket=bucket, Key="c", UploadId=upload,
                                        MultipartUpload={"Parts": parts}, IfNoneMatch="*")
    upload, parts = _upload_one_part(s3, bucket, "c")
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="c", UploadId=upload,
                                     MultipartUpload={"Parts": parts}, IfNoneMatch="*")
    assert code_of(exc) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="c", UploadId=upload,
                                     MultipartUpload={"Parts": parts}, IfMatch='"0000"')
    assert code_of(exc) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="c", UploadId=upload,
                                     MultipartUpload={"Parts": parts},
                                     IfNoneMatch=f'"0000", {done["ETag"]}')
    assert code_of(exc) == ("PreconditionFailed", 412)
    # The upload survived the refusals and completes when the condition holds.
    s3.complete_multipart_upload(Bucket=bucket, Key="c", UploadId=upload,
                                 MultipartUpload={"Parts": parts}, IfMatch=done["ETag"])
    assert s3.get_object(Bucket=bucket, Key="c")["Body"].read() == b"mp"
    upload, parts = _upload_one_part(s3, bucket, "c")  # another ETag: the write proceeds
    s3.complete_multipart_upload(Bucket=bucket, Key="c", UploadId=upload,
                                 MultipartUpload={"Parts": parts}, IfNoneMatch='"0000"')
    upload, parts = _upload_one_part(s3, bucket, "fresh")
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="fresh", UploadId=upload,
                                     MultipartUpload={"Parts": parts}, IfMatch=done["ETag"])
    assert code_of(exc) == ("NoSuchKey", 404)
