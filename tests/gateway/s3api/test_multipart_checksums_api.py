"""Multipart uploads with a declared checksum algorithm and type, through boto3."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.clients.helpers import MiB, payload, sha256
from tests.gateway.s3api.clients.test_boto3_extras import checksum, composite
from tests.gateway.s3api.test_objects_api import code_of

PARTS = [payload(5 * MiB, "p1"), payload(5 * MiB, "p2"), payload(1000, "p3")]


def _create(s3: Any, bucket: str, key: str, algorithm: str, kind: str | None) -> str:
    extra = {} if kind is None else {"ChecksumType": kind}
    res = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm=algorithm,
                                     **extra)
    assert res["ChecksumAlgorithm"] == algorithm
    assert res["ChecksumType"] == (kind or ("FULL_OBJECT" if algorithm == "CRC64NVME"
                                            else "COMPOSITE"))
    return str(res["UploadId"])


def _send(s3: Any, bucket: str, key: str, upload_id: str, algorithm: str,
          parts: list[bytes] = PARTS) -> list[dict[str, Any]]:
    done = []
    for number, data in enumerate(parts, start=1):
        res = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number,
                             Body=data, ChecksumAlgorithm=algorithm)
        assert res[f"Checksum{algorithm}"] == checksum(algorithm, data)
        done.append({"PartNumber": number, "ETag": res["ETag"],
                     f"Checksum{algorithm}": res[f"Checksum{algorithm}"]})
    return done


@pytest.mark.parametrize(("algorithm", "kind"), [
    ("CRC32", None), ("CRC32C", "COMPOSITE"), ("SHA1", None), ("SHA256", "COMPOSITE"),
])
def test_composite_upload(s3: Any, bucket: str, algorithm: str, kind: str | None) -> None:
    upload_id = _create(s3, bucket, "c", algorithm, kind)
    done = _send(s3, bucket, "c", upload_id, algorithm)
    listed = s3.list_parts(Bucket=bucket, Key="c", UploadId=upload_id)
    assert listed["ChecksumAlgorithm"] == algorithm
    assert listed["ChecksumType"] == "COMPOSITE"
    assert [p[f"Checksum{algorithm}"] for p in listed["Parts"]] == \
        [checksum(algorithm, p) for p in PARTS]
    res = s3.complete_multipart_upload(Bucket=bucket, Key="c", UploadId=upload_id,
                                       MultipartUpload={"Parts": done})
    expected = composite(algorithm, PARTS)
    assert res[f"Checksum{algorithm}"] == expected
    assert res["ChecksumType"] == "COMPOSITE"
    head = s3.head_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")
    assert head[f"Checksum{algorithm}"] == expected
    assert head["ChecksumType"] == "COMPOSITE"
    got = s3.get_object(Bucket=bucket, Key="c", ChecksumMode="ENABLED")
    assert got[f"Checksum{algorithm}"] == expected
    assert sha256(got["Body"].read()) == sha256(b"".join(PARTS))


@pytest.mark.parametrize(("algorithm", "kind"), [
    ("CRC32", "FULL_OBJECT"), ("CRC32C", "FULL_OBJECT"), ("CRC64NVME", None),
])
def test_full_object_upload(s3: Any, bucket: str, algorithm: str, kind: str | None) -> None:
    upload_id = _create(s3, bucket, "f", algorithm, kind)
    done = _send(s3, bucket, "f", upload_id, algorithm)
    whole = checksum(algorithm, b"".join(PARTS))
    res = s3.complete_multipart_upload(
        Bucket=bucket, Key="f", UploadId=upload_id, MultipartUpload={"Parts": done},
        ChecksumType="FULL_OBJECT", **{f"Checksum{algorithm}": whole})
    assert res[f"Checksum{algorithm}"] == whole
    assert res["ChecksumType"] == "FULL_OBJECT"
    head = s3.head_object(Bucket=bucket, Key="f", ChecksumMode="ENABLED")
    assert head[f"Checksum{algorithm}"] == whole
    assert head["ChecksumType"] == "FULL_OBJECT"


def test_full_object_parts_need_no_checksum_in_complete(s3: Any, bucket: str) -> None:
    upload_id = _create(s3, bucket, "f", "CRC32", "FULL_OBJECT")
    done = _send(s3, bucket, "f", upload_id, "CRC32")
    bare = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in done]
    res = s3.complete_multipart_upload(Bucket=bucket, Key="f", UploadId=upload_id,
                                       MultipartUpload={"Parts": bare})
    assert res["ChecksumCRC32"] == checksum("CRC32", b"".join(PARTS))


@pytest.mark.parametrize(("headers", "message"), [
    ({"x-amz-checksum-algorithm": "MD4"}, "Checksum algorithm provided is unsupported"),
    ({"x-amz-checksum-algorithm": "CRC32", "x-amz-checksum-type": "PARTIAL"},
     "Value for x-amz-checksum-type header is invalid."),
    ({"x-amz-checksum-type": "COMPOSITE"},
     "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm"),
    ({"x-amz-checksum-algorithm": "CRC64NVME", "x-amz-checksum-type": "COMPOSITE"},
     "The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm."),
    ({"x-amz-checksum-algorithm": "SHA256", "x-amz-checksum-type": "FULL_OBJECT"},
     "The FULL_OBJECT checksum type cannot be used with the sha256 checksum algorithm."),
])
def test_bad_create_headers(s3: Any, bucket: str, headers: dict[str, str],
                            message: str) -> None:
    def add(request: Any, **_: Any) -> None:
        for name, value in headers.items():
            request.headers[name] = value
    s3.meta.events.register("before-sign.s3.CreateMultipartUpload", add)
    try:
        with pytest.raises(ClientError) as exc:
            s3.create_multipart_upload(Bucket=bucket, Key="bad")
    finally:
        s3.meta.events.unregister("before-sign.s3.CreateMultipartUpload", add)
    assert code_of(exc) == ("InvalidRequest", 400)
    assert message in exc.value.response["Error"]["Message"]
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_part_of_another_algorithm_is_refused(s3: Any, bucket: str) -> None:
    upload_id = _create(s3, bucket, "k", "SHA256", None)
    with pytest.raises(ClientError) as exc:
        s3.upload_part(Bucket=bucket, Key="k", UploadId=upload_id, PartNumber=1,
                       Body=PARTS[2], ChecksumAlgorithm="CRC32")
    assert code_of(exc) == ("InvalidRequest", 400)
    assert exc.value.response["Error"]["Message"] == (
        "Checksum Type mismatch occurred, expected checksum Type: sha256, actual checksum "
        "Type: crc32")
    assert s3.list_parts(Bucket=bucket, Key="k", UploadId=upload_id).get("Parts", []) == []


def test_wrong_part_checksum_then_right_completion(s3: Any, bucket: str) -> None:
    upload_id = _create(s3, bucket, "w", "CRC32C", None)
    done = _send(s3, bucket, "w", upload_id, "CRC32C")
    wrong = [dict(p) for p in done]
    wrong[1]["ChecksumCRC32C"] = checksum("CRC32C", b"something else")
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="w", UploadId=upload_id,
                                     MultipartUpload={"Parts": wrong})
    assert code_of(exc) == ("InvalidPart", 400)
    other = [dict(p) for p in done]
    del other[0]["ChecksumCRC32C"]
    other[0]["ChecksumSHA1"] = checksum("SHA1", PARTS[0])
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="w", UploadId=upload_id,
                                     MultipartUpload={"Parts": other})
    assert code_of(exc) == ("BadDigest", 400)
    missing = [dict(p) for p in done]
    del missing[2]["ChecksumCRC32C"]
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="w", UploadId=upload_id,
                                     MultipartUpload={"Parts": missing})
    assert code_of(exc) == ("InvalidRequest", 400)
    assert "It was missing for part 3 in the request." in exc.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as exc:
        s3.head_object(Bucket=bucket, Key="w")
    assert code_of(exc)[1] == 404
    res = s3.complete_multipart_upload(Bucket=bucket, Key="w", UploadId=upload_id,
                                       MultipartUpload={"Parts": done})
    assert res["ChecksumCRC32C"] == composite("CRC32C", PARTS)
    assert sha256(s3.get_object(Bucket=bucket, Key="w")["Body"].read()) == \
        sha256(b"".join(PARTS))


def test_mismatched_full_object_checksum_then_right_completion(s3: Any, bucket: str) -> None:
    upload_id = _create(s3, bucket, "m", "CRC64NVME", None)
    done = _send(s3, bucket, "m", upload_id, "CRC64NVME")
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="m", UploadId=upload_id, MultipartUpload={"Parts": done},
            ChecksumType="FULL_OBJECT", ChecksumCRC64NVME=checksum("CRC64NVME", b"nope"))
    assert code_of(exc) == ("BadDigest", 400)
    assert exc.value.response["Error"]["Message"] == \
        "The crc64nvme you specified did not match the calculated checksum."
    with pytest.raises(ClientError) as exc:
        s3.complete_multipart_upload(Bucket=bucket, Key="m", UploadId=upload_id,
                                     MultipartUpload={"Parts": done}, ChecksumType="COMPOSITE")
    assert code_of(exc) == ("InvalidRequest", 400)
    whole = checksum("CRC64NVME", b"".join(PARTS))
    res = s3.complete_multipart_upload(
        Bucket=bucket, Key="m", UploadId=upload_id, MultipartUpload={"Parts": done},
        ChecksumType="FULL_OBJECT", ChecksumCRC64NVME=whole)
    assert res["ChecksumCRC64NVME"] == whole


def test_part_copy_gets_the_upload_checksum(s3: Any, bucket: str) -> None:
    source = payload(300_000, "copy-src")
    s3.put_object(Bucket=bucket, Key="src", Body=source)
    upload_id = _create(s3, bucket, "pc", "SHA1", None)
    res = s3.upload_part_copy(Bucket=bucket, Key="pc", UploadId=upload_id, PartNumber=1,
                              CopySource={"Bucket": bucket, "Key": "src"})
    assert res["CopyPartResult"]["ChecksumSHA1"] == checksum("SHA1", source)
    done = [{"PartNumber": 1, "ETag": res["CopyPartResult"]["ETag"],
             "ChecksumSHA1": checksum("SHA1", source)}]
    res = s3.complete_multipart_upload(Bucket=bucket, Key="pc", UploadId=upload_id,
                                       MultipartUpload={"Parts": done})
    assert res["ChecksumSHA1"] == composite("SHA1", [source])


def test_get_object_attributes(s3: Any, bucket: str) -> None:
    upload_id = _create(s3, bucket, "a", "SHA256", None)
    done = _send(s3, bucket, "a", upload_id, "SHA256")
    s3.complete_multipart_upload(Bucket=bucket, Key="a", UploadId=upload_id,
                                 MultipartUpload={"Parts": done})
    etag = s3.head_object(Bucket=bucket, Key="a")["ETag"]
    every = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]
    res = s3.get_object_attributes(Bucket=bucket, Key="a", ObjectAttributes=every)
    assert res["ETag"] == etag.strip('"')
    assert res["Checksum"]["ChecksumSHA256"] == composite("SHA256", PARTS)
    assert res["Checksum"]["ChecksumType"] == "COMPOSITE"
    assert res["StorageClass"] == "STANDARD"
    assert res["ObjectSize"] == sum(len(p) for p in PARTS)
    assert res["LastModified"] is not None
    parts = res["ObjectParts"]
    assert parts["TotalPartsCount"] == 3
    assert [(p["PartNumber"], p["Size"], p["ChecksumSHA256"]) for p in parts["Parts"]] == \
        [(n, len(p), checksum("SHA256", p)) for n, p in enumerate(PARTS, start=1)]
    for number, data in enumerate(PARTS, start=1):  # a part read carries its checksum
        got = s3.get_object(Bucket=bucket, Key="a", PartNumber=number)
        assert (got["ChecksumSHA256"], got["ChecksumType"]) == \
            (checksum("SHA256", data), "COMPOSITE")
        assert got["Body"].read() == data
    page = s3.get_object_attributes(Bucket=bucket, Key="a", ObjectAttributes=["ObjectParts"],
                                    MaxParts=2)["ObjectParts"]
    assert page["IsTruncated"] is True and page["MaxParts"] == 2
    assert [p["PartNumber"] for p in page["Parts"]] == [1, 2]
    rest = s3.get_object_attributes(Bucket=bucket, Key="a", ObjectAttributes=["ObjectParts"],
                                    PartNumberMarker=page["NextPartNumberMarker"])
    assert rest["ObjectParts"]["IsTruncated"] is False
    assert [p["PartNumber"] for p in rest["ObjectParts"]["Parts"]] == [3]
    assert set(s3.get_object_attributes(Bucket=bucket, Key="a",
                                        ObjectAttributes=["ObjectSize"])) - \
        {"ResponseMetadata", "LastModified"} == {"ObjectSize"}


def test_get_object_attributes_of_a_plain_object_and_errors(s3: Any, bucket: str) -> None:
    data = payload(4321, "plain")
    s3.put_object(Bucket=bucket, Key="p", Body=data, ChecksumAlgorithm="CRC32")
    res = s3.get_object_attributes(Bucket=bucket, Key="p",
                                   ObjectAttributes=["ETag", "Checksum", "ObjectParts",
                                                     "ObjectSize"])
    assert res["Checksum"] == {"ChecksumCRC32": checksum("CRC32", data),
                               "ChecksumType": "FULL_OBJECT"}
    assert "ObjectParts" not in res
    assert res["ObjectSize"] == len(data)
    with pytest.raises(ClientError) as exc:
        s3.get_object_attributes(Bucket=bucket, Key="missing", ObjectAttributes=["ETag"])
    assert code_of(exc) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as exc:
        s3.get_object_attributes(Bucket=bucket, Key="p", ObjectAttributes=["Colour"])
    assert code_of(exc) == ("InvalidArgument", 400)

    def condition(request: Any, **_: Any) -> None:
        request.headers["If-Match"] = '"0123456789abcdef0123456789abcdef"'
    s3.meta.events.register("before-sign.s3.GetObjectAttributes", condition)
    try:
        with pytest.raises(ClientError) as exc:
            s3.get_object_attributes(Bucket=bucket, Key="p", ObjectAttributes=["ETag"])
    finally:
        s3.meta.events.unregister("before-sign.s3.GetObjectAttributes", condition)
    assert code_of(exc) == ("PreconditionFailed", 412)


def test_get_object_attributes_version_id(s3: Any, bucket: str) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket=bucket, Key="v", Body=b"one")["VersionId"]
    s3.put_object(Bucket=bucket, Key="v", Body=b"second")
    res = s3.get_object_attributes(Bucket=bucket, Key="v", VersionId=first,
                                   ObjectAttributes=["ObjectSize"])
    assert res["ObjectSize"] == 3 and res["VersionId"] == first
