"""Small S3 answers that conformance suites check, through boto3, the aws CLI and raw
signed requests: URL-encoded listings, an empty continuation token, DELETE without a
delete marker, expired presigned writes, re-creating one's bucket with another ACL."""

from __future__ import annotations

import json
import time
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.gateway.s3api.clients.helpers import S3_NS, Cli, make_aws
from tests.gateway.s3api.test_objects_api import code_of
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess
from tests.support.signing import send

KEYS = ["foo+1/bar", "foo/bar/xyzzy", "quux ab/thud", "asdf+b"]


@pytest.fixture
def aws(squall: SquallProcess, tmp_path: Path) -> Cli:
    return make_aws(squall.endpoint, tmp_path / "aws-home")


@pytest.fixture
def listed(s3: Any, bucket: str) -> str:
    for key in KEYS:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    return bucket


def _raw_listing(squall: SquallProcess, bucket: str, query: str) -> ET.Element:
    response = send("GET", f"{squall.endpoint}/{bucket}?{query}")
    assert response.status_code == 200, response.text
    return ET.fromstring(response.content)


@pytest.mark.parametrize("v2", [False, True])
def test_url_encoding_covers_keys_prefixes_prefix_and_delimiter(
        s3: Any, squall: SquallProcess, listed: str, v2: bool) -> None:
    listing = s3.list_objects_v2 if v2 else s3.list_objects
    res = listing(Bucket=listed, Delimiter="/", EncodingType="url")
    assert res["Delimiter"] == "/"
    assert [o["Key"] for o in res["Contents"]] == ["asdf%2Bb"]
    assert [p["Prefix"] for p in res["CommonPrefixes"]] == ["foo%2B1/", "foo/", "quux%20ab/"]
    # On the wire, Prefix and Delimiter are encoded too (S3's ListObjects: "Delimiter,
    # Marker, Prefix, NextMarker, Key"); botocore decodes some of them, not all.
    query = urllib.parse.urlencode({"prefix": "quux ab/", "delimiter": "+",
                                    "encoding-type": "url"})
    root = _raw_listing(squall, listed, ("list-type=2&" if v2 else "") + query)
    assert root.findtext(f"{S3_NS}Prefix") == "quux%20ab/"
    assert root.findtext(f"{S3_NS}Delimiter") == "%2B"
    assert [k.text for k in root.iter(f"{S3_NS}Key")] == ["quux%20ab/thud"]


def test_url_encoding_through_the_cli(aws: Cli, listed: str) -> None:
    # Asked for by the caller, the encoding is left to it: the CLI shows what was sent.
    out = json.loads(aws("s3api", "list-objects", "--bucket", listed, "--delimiter", "+",
                         "--encoding-type", "url", "--prefix", "quux ab/",
                         "--no-paginate").stdout)
    assert (out["Prefix"], out["Delimiter"]) == ("quux%20ab/", "%2B")
    assert [o["Key"] for o in out["Contents"]] == ["quux%20ab/thud"]
    out = json.loads(aws("s3api", "list-objects-v2", "--bucket", listed, "--delimiter", "/",
                         "--encoding-type", "url").stdout)
    assert [p["Prefix"] for p in out["CommonPrefixes"]] == ["foo%2B1/", "foo/", "quux%20ab/"]


def test_empty_continuation_token_is_the_first_page(s3: Any, squall: SquallProcess,
                                                    listed: str) -> None:
    res = s3.list_objects_v2(Bucket=listed, ContinuationToken="")
    assert res["ContinuationToken"] == ""
    assert res["IsTruncated"] is False
    assert [o["Key"] for o in res["Contents"]] == sorted(KEYS)
    page = s3.list_objects_v2(Bucket=listed, ContinuationToken="", MaxKeys=2)
    assert [o["Key"] for o in page["Contents"]] == sorted(KEYS)[:2]
    rest = s3.list_objects_v2(Bucket=listed, ContinuationToken=page["NextContinuationToken"])
    assert [o["Key"] for o in rest["Contents"]] == sorted(KEYS)[2:]
    root = _raw_listing(squall, listed, "list-type=2&continuation-token=")
    assert root.find(f"{S3_NS}ContinuationToken") is not None
    with pytest.raises(ClientError) as exc:  # a token that is not one of ours still fails
        s3.list_objects_v2(Bucket=listed, ContinuationToken="%%%")
    assert code_of(exc) == ("InvalidArgument", 400)


def test_delete_answers_a_delete_marker_only_when_one_is_made(s3: Any, aws: Cli,
                                                              bucket: str) -> None:
    # S3 sends x-amz-delete-marker only where DELETE made (or removed) a delete marker:
    # never in a bucket that never had versioning.
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    res = s3.delete_object(Bucket=bucket, Key="k")
    assert res["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert "x-amz-delete-marker" not in res["ResponseMetadata"]["HTTPHeaders"]
    assert "DeleteMarker" not in res and "VersionId" not in res
    s3.put_object(Bucket=bucket, Key="c", Body=b"x")
    assert aws("s3api", "delete-object", "--bucket", bucket, "--key", "c").stdout.strip() \
        == ""
    # A suspended bucket makes a null delete marker, and says so.
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    res = s3.delete_object(Bucket=bucket, Key="k")
    assert res["DeleteMarker"] is True
    assert res["VersionId"] == "null"
    out = json.loads(aws("s3api", "delete-object", "--bucket", bucket, "--key", "k").stdout)
    assert out == {"DeleteMarker": True, "VersionId": "null"}


def _presign_v4(method: str, url: str, expires: int) -> str:
    request = AWSRequest(method=method, url=url)
    S3SigV4QueryAuth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1",
                     expires=expires).add_auth(request)
    assert f"X-Amz-Expires={expires}" in request.url
    return str(request.url)


@pytest.mark.parametrize("signature_version", ["s3v4", "s3"])
def test_expired_presigned_put_is_access_denied(squall: SquallProcess, s3: Any, bucket: str,
                                                signature_version: str) -> None:
    signer = boto3.client("s3", endpoint_url=squall.endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                          config=Config(signature_version=signature_version,
                                        s3={"addressing_style": "path"}))
    params = {"Bucket": bucket, "Key": "late"}
    # A negative lifetime (SigV2: a URL expired before it was made) and one that ran out.
    for expires in (-1000, 1):
        if expires < 0 and signature_version == "s3v4":
            # boto3's generate_presigned_url(ExpiresIn=-1000) without awscrt, whose
            # signer refuses a negative lifetime
            url = _presign_v4("PUT", f"{squall.endpoint}/{bucket}/late", expires)
        else:
            url = signer.generate_presigned_url("put_object", Params=params,
                                                ExpiresIn=expires, HttpMethod="PUT")
        if expires > 0:
            time.sleep(2.1)
        response = httpx.put(url, content=b"too late")
        if expires < 0 and signature_version == "s3v4":
            # Out of SigV4's range (1..604800), as S3 answers it.
            assert response.status_code == 400, response.text
            assert ET.fromstring(response.content).findtext("Code") == \
                "AuthorizationQueryParametersError"
            continue
        assert response.status_code == 403, response.text
        assert ET.fromstring(response.content).findtext("Code") == "AccessDenied"
    with pytest.raises(ClientError) as exc:
        s3.head_object(Bucket=bucket, Key="late")
    assert code_of(exc)[1] == 404


def test_expired_presigned_get_through_the_cli(aws: Cli, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    url = aws("s3", "presign", f"s3://{bucket}/k", "--expires-in", "1").stdout.strip()
    time.sleep(2.1)
    response = httpx.get(url)
    assert response.status_code == 403
    assert ET.fromstring(response.content).findtext("Code") == "AccessDenied"


def test_recreating_ones_bucket_with_another_acl_is_409(s3: Any, aws: Cli,
                                                        bucket: str) -> None:
    # us-east-1: S3's legacy 200 for re-creating one's bucket as it is ...
    assert s3.create_bucket(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.create_bucket(Bucket=bucket, ACL="private")[
        "ResponseMetadata"]["HTTPStatusCode"] == 200
    # ... but 409 BucketAlreadyOwnedByYou when the request asks for another ACL, before
    # the ACL itself is judged (here ACLs are disabled: no 400 for a public-read ACL).
    for acl in ("public-read", "public-read-write", "authenticated-read"):
        with pytest.raises(ClientError) as exc:
            s3.create_bucket(Bucket=bucket, ACL=acl)
        assert code_of(exc) == ("BucketAlreadyOwnedByYou", 409)
    failed = aws("s3api", "create-bucket", "--bucket", bucket, "--acl", "public-read",
                 ok=False)
    assert "BucketAlreadyOwnedByYou" in failed.stderr
    # Nothing changed.
    grants = s3.get_bucket_acl(Bucket=bucket)["Grants"]
    assert [g["Permission"] for g in grants] == ["FULL_CONTROL"]
