"""Bucket operations, listings and DeleteObjects through boto3."""

from __future__ import annotations

import uuid

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.gateway.s3api.test_objects_api import code_of
from tests.support.server import ACCESS_KEY, SECRET_KEY


def test_bucket_lifecycle(s3) -> None:
    name = f"life-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    assert name in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.head_bucket(Bucket=name)
    # Re-creating one's own bucket: 200 in us-east-1 (S3's legacy answer), 409 elsewhere.
    assert s3.create_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200
    elsewhere = boto3.client("s3", endpoint_url=s3.meta.endpoint_url, region_name="eu-west-1",
                             aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                             config=Config(s3={"addressing_style": "path"}))
    with pytest.raises(ClientError) as exc:
        elsewhere.create_bucket(Bucket=name, CreateBucketConfiguration={
            "LocationConstraint": "eu-west-1"})
    assert code_of(exc) == ("BucketAlreadyOwnedByYou", 409)
    s3.put_object(Bucket=name, Key="k", Body=b"x")
    with pytest.raises(ClientError) as exc:
        s3.delete_bucket(Bucket=name)
    assert code_of(exc) == ("BucketNotEmpty", 409)
    s3.delete_object(Bucket=name, Key="k")
    s3.delete_bucket(Bucket=name)
    with pytest.raises(ClientError) as exc:
        s3.head_bucket(Bucket=name)
    assert code_of(exc) == ("404", 404)
    with pytest.raises(ClientError) as exc:
        s3.list_objects_v2(Bucket=name)
    assert code_of(exc) == ("NoSuchBucket", 404)


@pytest.mark.parametrize("name", ["ab", "UPPER", "-start", "end-", "a..b", "169.254.1.1",
                                  "x" * 64, "under_score", "xn--punycode", "bad-s3alias"])
def test_invalid_bucket_names(s3, name: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.create_bucket(Bucket=name)
    assert code_of(exc) == ("InvalidBucketName", 400)


def test_create_bucket_with_location_and_get_location(s3) -> None:
    name = f"loc-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    assert s3.get_bucket_location(Bucket=name)["LocationConstraint"] is None


def test_list_v2_delimiter_prefix_pagination(s3, bucket: str) -> None:
    keys = ["a", "a-b", "a/1", "a/2", "a/sub/3", "a0", "b/x", "c"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    full = s3.list_objects_v2(Bucket=bucket)
    assert [o["Key"] for o in full["Contents"]] == sorted(keys)
    top = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [o["Key"] for o in top["Contents"]] == ["a", "a-b", "a0", "c"]
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["a/", "b/"]
    sub = s3.list_objects_v2(Bucket=bucket, Prefix="a/", Delimiter="/")
    assert [o["Key"] for o in sub["Contents"]] == ["a/1", "a/2"]
    assert [p["Prefix"] for p in sub["CommonPrefixes"]] == ["a/sub/"]
    seen: list[str] = []
    token = None
    while True:
        kwargs = {"ContinuationToken": token} if token else {}
        page = s3.list_objects_v2(Bucket=bucket, Delimiter="/", MaxKeys=2, **kwargs)
        seen += [o["Key"] for o in page.get("Contents", [])]
        seen += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        assert page["KeyCount"] <= 2
        if not page["IsTruncated"]:
            break
        token = page["NextContinuationToken"]
    assert sorted(seen) == ["a", "a-b", "a/", "a0", "b/", "c"]
    after = s3.list_objects_v2(Bucket=bucket, StartAfter="a0")
    assert [o["Key"] for o in after["Contents"]] == ["b/x", "c"]


def test_list_v1_marker_and_next_marker(s3, bucket: str) -> None:
    for key in ["k1", "k2", "k3", "p/x", "p/y"]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    page = s3.list_objects(Bucket=bucket, MaxKeys=2)
    assert [o["Key"] for o in page["Contents"]] == ["k1", "k2"] and page["IsTruncated"]
    page = s3.list_objects(Bucket=bucket, Marker="k2")
    assert [o["Key"] for o in page["Contents"]] == ["k3", "p/x", "p/y"]
    page = s3.list_objects(Bucket=bucket, Delimiter="/", MaxKeys=3)
    assert page["IsTruncated"] and page["NextMarker"] == "k3"
    page = s3.list_objects(Bucket=bucket, Delimiter="/", Marker=page["NextMarker"])
    assert [p["Prefix"] for p in page["CommonPrefixes"]] == ["p/"]


def test_list_url_encoding(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="sp ace+plus&amp/ü", Body=b"x")
    # Asked for by botocore itself (ListObjects v1): decoded again on arrival.
    assert s3.list_objects(Bucket=bucket)["Contents"][0]["Key"] == "sp ace+plus&amp/ü"
    # Asked for explicitly: returned encoded.
    page = s3.list_objects_v2(Bucket=bucket, EncodingType="url")
    assert page["Contents"][0]["Key"] == "sp%20ace%2Bplus%26amp/%C3%BC"


def test_list_bad_arguments(s3, bucket: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.list_objects_v2(Bucket=bucket, ContinuationToken="!!!")
    assert code_of(exc) == ("InvalidArgument", 400)
    with pytest.raises(ClientError) as exc:
        s3.list_objects_v2(Bucket=bucket, MaxKeys=-1)
    assert code_of(exc) == ("InvalidArgument", 400)


def test_delete_objects_verbose_and_quiet(s3, bucket: str) -> None:
    for key in ["a", "b", "c"]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    res = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "a"}, {"Key": "b"}, {"Key": "missing"}]})
    assert sorted(d["Key"] for d in res["Deleted"]) == ["a", "b", "missing"]
    res = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "c"}], "Quiet": True})
    assert "Deleted" not in res and "Errors" not in res
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_delete_objects_reports_per_key_errors(s3, bucket: str) -> None:
    res = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "k" * 1100}]})
    assert res["Errors"][0]["Code"] == "KeyTooLongError"


@pytest.mark.parametrize("versioning", [None, "Enabled"])
def test_delete_bucket_aborts_incomplete_uploads(s3, versioning: str | None) -> None:
    name = f"mpu-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    if versioning:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": versioning})
    first = s3.create_multipart_upload(Bucket=name, Key="a/big")["UploadId"]
    s3.upload_part(Bucket=name, Key="a/big", UploadId=first, PartNumber=1, Body=b"p" * 1000)
    second = s3.create_multipart_upload(Bucket=name, Key="other")["UploadId"]
    s3.put_object(Bucket=name, Key="obj", Body=b"x")
    with pytest.raises(ClientError) as exc:  # an object remains: nothing is aborted
        s3.delete_bucket(Bucket=name)
    assert code_of(exc) == ("BucketNotEmpty", 409)
    listed = s3.list_multipart_uploads(Bucket=name)["Uploads"]
    assert sorted(u["UploadId"] for u in listed) == sorted([first, second])
    if versioning:
        for v in s3.list_object_versions(Bucket=name).get("Versions", []):
            s3.delete_object(Bucket=name, Key=v["Key"], VersionId=v["VersionId"])
    else:
        s3.delete_object(Bucket=name, Key="obj")
    s3.delete_bucket(Bucket=name)  # only uploads remain: they go with the bucket
    with pytest.raises(ClientError) as exc:
        s3.head_bucket(Bucket=name)
    assert code_of(exc) == ("404", 404)
    s3.create_bucket(Bucket=name)
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=name)
    with pytest.raises(ClientError) as exc:
        s3.list_parts(Bucket=name, Key="a/big", UploadId=first)
    assert code_of(exc) == ("NoSuchUpload", 404)
    s3.delete_bucket(Bucket=name)


def test_bucket_tagging(s3, bucket: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_tagging(Bucket=bucket)
    assert code_of(exc) == ("NoSuchTagSet", 404)
    tags = [{"Key": k, "Value": v} for k, v in (("zeta", "1"), ("alpha", ""), ("mid", "x"))]
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags})
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == sorted(tags,
                                                                    key=lambda t: t["Key"])
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "only", "Value": "1"}]})
    assert s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == [{"Key": "only", "Value": "1"}]
    s3.delete_bucket_tagging(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_tagging(Bucket=bucket)
    assert code_of(exc) == ("NoSuchTagSet", 404)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_tagging(Bucket=f"{bucket}-missing")
    assert code_of(exc) == ("NoSuchBucket", 404)


@pytest.mark.parametrize("tags", [
    [{"Key": f"k{i}", "Value": "v"} for i in range(51)],
    [{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}],
    [{"Key": "", "Value": "1"}],
    [{"Key": "k" * 129, "Value": "1"}],
    [{"Key": "k", "Value": "v" * 257}],
    [{"Key": "aws:reserved", "Value": "1"}],
])
def test_bucket_tagging_bad_tags(s3, squall, bucket: str, tags: list) -> None:  # type: ignore[no-untyped-def]
    raw = make_client(squall.endpoint, parameter_validation=False)
    with pytest.raises(ClientError) as exc:
        raw.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags})
    assert code_of(exc) == ("InvalidTag", 400)
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [
        {"Key": f"k{i}", "Value": "v"} for i in range(50)]})


def test_list_buckets_pagination_and_prefix(s3, squall) -> None:  # type: ignore[no-untyped-def]
    stem = f"lb-{uuid.uuid4().hex[:8]}"
    names = [f"{stem}-{i}" for i in range(5)]
    for name in names:
        s3.create_bucket(Bucket=name)
    try:
        everything = s3.list_buckets()
        assert "ContinuationToken" not in everything
        assert set(names) <= {b["Name"] for b in everything["Buckets"]}
        first = s3.list_buckets(Prefix=stem, MaxBuckets=2)
        assert [b["Name"] for b in first["Buckets"]] == names[:2]
        assert first["Prefix"] == stem
        assert first["Buckets"][0]["BucketRegion"] == "us-east-1"
        seen = [b["Name"] for b in first["Buckets"]]
        token = first["ContinuationToken"]
        while token:
            page = s3.list_buckets(Prefix=stem, MaxBuckets=2, ContinuationToken=token)
            seen += [b["Name"] for b in page["Buckets"]]
            token = page.get("ContinuationToken")
        assert seen == names
        assert s3.list_buckets(Prefix=stem + "-3")["Buckets"][0]["Name"] == names[3]
        assert s3.list_buckets(Prefix="zz-none-")["Buckets"] == []
        raw = make_client(squall.endpoint, parameter_validation=False)
        for bad in ({"MaxBuckets": 0}, {"MaxBuckets": 10_001},
                    {"ContinuationToken": "not base64!"}):
            with pytest.raises(ClientError) as exc:
                raw.list_buckets(**bad)
            assert code_of(exc) == ("InvalidArgument", 400), bad
    finally:
        for name in names:
            s3.delete_bucket(Bucket=name)
