"""x-amz-website-redirect-location and x-amz-storage-class kept with the object and given
back (HEAD, GET, listings, GetObjectAttributes) as S3 gives them; CompleteMultipartUpload's
absolute Location."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.test_objects_api import code_of
from tests.support.server import SquallProcess


def test_website_redirect_location_is_stored(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="old", Body=b"x", WebsiteRedirectLocation="/new")
    assert s3.head_object(Bucket=bucket, Key="old")["WebsiteRedirectLocation"] == "/new"
    got = s3.get_object(Bucket=bucket, Key="old")
    assert got["WebsiteRedirectLocation"] == "/new" and got["Metadata"] == {}
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp",
                                        WebsiteRedirectLocation="https://example.com/x")
    part = s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload["UploadId"],
                          PartNumber=1, Body=b"p")
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=upload["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1,
                                                             "ETag": part["ETag"]}]})
    assert s3.head_object(Bucket=bucket, Key="mp")["WebsiteRedirectLocation"] == \
        "https://example.com/x"
    s3.put_object(Bucket=bucket, Key="plain", Body=b"y")
    assert "WebsiteRedirectLocation" not in s3.head_object(Bucket=bucket, Key="plain")
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="bad", Body=b"x", WebsiteRedirectLocation="ftp://x")
    assert code_of(exc) == ("InvalidRedirectLocation", 400)


def test_storage_class_is_reported(s3, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="ia", Body=b"x", StorageClass="STANDARD_IA")
    s3.put_object(Bucket=bucket, Key="std", Body=b"y", StorageClass="STANDARD")
    s3.put_object(Bucket=bucket, Key="none", Body=b"z")
    assert s3.head_object(Bucket=bucket, Key="ia")["StorageClass"] == "STANDARD_IA"
    assert s3.get_object(Bucket=bucket, Key="ia")["StorageClass"] == "STANDARD_IA"
    # S3 sends no x-amz-storage-class for STANDARD.
    assert "StorageClass" not in s3.head_object(Bucket=bucket, Key="std")
    assert "StorageClass" not in s3.get_object(Bucket=bucket, Key="none")
    listed = {o["Key"]: o["StorageClass"]
              for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert listed == {"ia": "STANDARD_IA", "none": "STANDARD", "std": "STANDARD"}
    versions = {v["Key"]: v["StorageClass"]
                for v in s3.list_object_versions(Bucket=bucket)["Versions"]}
    assert versions["ia"] == "STANDARD_IA"
    attrs = s3.get_object_attributes(Bucket=bucket, Key="ia", ObjectAttributes=["StorageClass"])
    assert attrs["StorageClass"] == "STANDARD_IA"
    with pytest.raises(ClientError) as exc:
        s3.put_object(Bucket=bucket, Key="bad", Body=b"x", StorageClass="PLATINUM")
    assert code_of(exc) == ("InvalidStorageClass", 400)
    # A client cannot forge the entry the class is kept in.
    s3.put_object(Bucket=bucket, Key="forged", Body=b"x",
                  Metadata={"squall-storage-class": "GLACIER"})
    assert "StorageClass" not in s3.head_object(Bucket=bucket, Key="forged")


def test_complete_location_is_an_absolute_url(s3, squall: SquallProcess, bucket: str) -> None:
    upload = s3.create_multipart_upload(Bucket=bucket, Key="dir/a b")["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key="dir/a b", UploadId=upload, PartNumber=1,
                          Body=b"x")
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key="dir/a b", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert done["Location"] == f"{squall.endpoint}/{bucket}/dir/a%20b"
