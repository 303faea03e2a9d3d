"""Put/Get/DeleteBucketPolicy and GetBucketPolicyStatus through boto3, the aws CLI and
raw HTTP, against a real gateway."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.s3api.clients.helpers import make_aws
from tests.gateway.s3api.test_objects_api import code_of
from tests.support.server import SquallProcess
from tests.support.signing import send


def public_read(bucket: str, **extra: Any) -> str:
    statement = {"Sid": "PublicRead", "Effect": "Allow", "Principal": "*",
                 "Action": ["s3:GetObject"], "Resource": [f"arn:aws:s3:::{bucket}/*"],
                 **extra}
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]}, indent=2)


@pytest.fixture
def bucket(s3) -> str:  # type: ignore[no-untyped-def]
    """A new bucket whose public access block (on by default, as S3's) is removed."""
    name = f"t-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=name)
    s3.delete_public_access_block(Bucket=name)
    return name


def test_block_public_policy(s3) -> None:
    name = f"t-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=name)  # all four settings on, as a new bucket on S3
    with pytest.raises(ClientError) as exc:
        s3.put_bucket_policy(Bucket=name, Policy=public_read(name))
    assert code_of(exc) == ("AccessDenied", 403)
    confined = public_read(name, Condition={"IpAddress": {"aws:SourceIp": "169.254.0.0/16"}})
    s3.put_bucket_policy(Bucket=name, Policy=confined)  # not public: accepted
    assert s3.get_bucket_policy_status(Bucket=name)["PolicyStatus"] == {"IsPublic": False}


def test_round_trip(s3, bucket: str) -> None:
    for call in (s3.get_bucket_policy, s3.get_bucket_policy_status):
        with pytest.raises(ClientError) as exc:
            call(Bucket=bucket)
        assert code_of(exc) == ("NoSuchBucketPolicy", 404)
    text = public_read(bucket)
    put = s3.put_bucket_policy(Bucket=bucket, Policy=text)
    assert put["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3.get_bucket_policy(Bucket=bucket)["Policy"] == text  # as sent
    assert s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"] == {"IsPublic": True}
    confined = public_read(bucket, Condition={"IpAddress": {"aws:SourceIp": "169.254.0.0/16"}})
    s3.put_bucket_policy(Bucket=bucket, Policy=confined)
    assert s3.get_bucket_policy(Bucket=bucket)["Policy"] == confined
    assert s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"] == {"IsPublic": False}
    deleted = s3.delete_bucket_policy(Bucket=bucket)
    assert deleted["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_policy(Bucket=bucket)
    assert code_of(exc) == ("NoSuchBucketPolicy", 404)
    s3.delete_bucket_policy(Bucket=bucket)  # idempotent, as S3


def test_policy_goes_with_the_bucket(s3, bucket: str) -> None:
    s3.put_bucket_policy(Bucket=bucket, Policy=public_read(bucket))
    s3.delete_bucket(Bucket=bucket)
    s3.create_bucket(Bucket=bucket)
    s3.delete_public_access_block(Bucket=bucket)
    with pytest.raises(ClientError) as exc:
        s3.get_bucket_policy(Bucket=bucket)
    assert code_of(exc) == ("NoSuchBucketPolicy", 404)


def test_missing_bucket(s3) -> None:
    for call, extra in ((s3.get_bucket_policy, {}), (s3.delete_bucket_policy, {}),
                        (s3.get_bucket_policy_status, {}),
                        (s3.put_bucket_policy, {"Policy": public_read("nope-none")})):
        with pytest.raises(ClientError) as exc:
            call(Bucket="nope-none", **extra)
        assert code_of(exc) == ("NoSuchBucket", 404)


def _statement(**fields: Any) -> str:
    base = {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::BUCKET/*", **fields}
    return json.dumps({"Statement": [{k: v for k, v in base.items() if v is not None}]})


@pytest.mark.parametrize(("policy", "message"), [
    ("not json", "first byte must be '{'"),
    ('{"Statement": [', "invalid Json"),
    ('{"Statement": []}', "Statement is empty"),
    (_statement(Resource="arn:aws:s3:::elsewhere/*"), "Policy has invalid resource"),
    (_statement(Action="s3:Teleport"), "Policy has invalid action"),
    (_statement(Resource=None), "Missing required field Resource"),
    (_statement(Condition={"DateLessThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}),
     "Invalid Condition type"),
])
def test_malformed(s3, bucket: str, policy: str, message: str) -> None:
    with pytest.raises(ClientError) as exc:
        s3.put_bucket_policy(Bucket=bucket, Policy=policy.replace("BUCKET", bucket))
    assert code_of(exc) == ("MalformedPolicy", 400)
    assert message in exc.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as exc:  # nothing was stored
        s3.get_bucket_policy(Bucket=bucket)
    assert code_of(exc) == ("NoSuchBucketPolicy", 404)


def test_size_limit(s3, bucket: str, squall: SquallProcess) -> None:
    statements = [{"Sid": f"s{i}", "Effect": "Allow", "Principal": "*",
                   "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/p{i}/*"}
                  for i in range(400)]
    with pytest.raises(ClientError) as exc:
        s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Statement": statements}))
    assert code_of(exc) == ("MalformedPolicy", 400)
    assert "maximum allowed document size" in exc.value.response["Error"]["Message"]
    # A body far past the limit is refused without being kept in memory whole.
    huge = b'{"Statement": [' + b" " * (1 << 20) + b"]}"
    response = send("PUT", f"{squall.endpoint}/{bucket}?policy=", body=huge)
    assert response.status_code == 400 and b"MalformedPolicy" in response.content


def test_aws_cli(squall: SquallProcess, bucket: str, tmp_path: Path) -> None:
    aws = make_aws(squall.endpoint, tmp_path / "aws-home")
    document = tmp_path / "policy.json"
    document.write_text(public_read(bucket))
    aws("s3api", "put-bucket-policy", "--bucket", bucket, "--policy", f"file://{document}")
    got = json.loads(aws("s3api", "get-bucket-policy", "--bucket", bucket).stdout)
    assert got["Policy"] == document.read_text()
    status = json.loads(aws("s3api", "get-bucket-policy-status", "--bucket", bucket).stdout)
    assert status == {"PolicyStatus": {"IsPublic": True}}
    bad = aws("s3api", "put-bucket-policy", "--bucket", bucket, "--policy",
              '{"Statement": {"Effect": "Allow"}}', ok=False)
    assert "MalformedPolicy" in bad.stderr and "Missing required field Principal" in bad.stderr
    aws("s3api", "delete-bucket-policy", "--bucket", bucket)
    gone = aws("s3api", "get-bucket-policy", "--bucket", bucket, ok=False)
    assert "NoSuchBucketPolicy" in gone.stderr
