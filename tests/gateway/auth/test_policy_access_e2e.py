"""Bucket policies enforced by the authorization point on a real gateway: anonymous
reads through curl, a Deny that wins over an ACL grant, aws:SourceIp, s3:prefix."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.gateway.s3api.test_objects_api import code_of
from tests.support.server import SquallProcess
from tests.support.signing import send


def add_user(squall: SquallProcess) -> dict[str, Any]:
    name = f"p{uuid.uuid4().hex[:10]}"
    response = send("POST", f"{squall.endpoint}/_squall/users?name={name}")
    assert response.status_code == 200, response.text
    user: dict[str, Any] = response.json()["user"]
    return user


def client_of(squall: SquallProcess, user: dict[str, Any]) -> Any:
    return boto3.client("s3", endpoint_url=squall.endpoint,
                        aws_access_key_id=user["access_key"],
                        aws_secret_access_key=user["secret_key"], region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))


def put_policy(s3: Any, bucket: str, *statements: dict[str, Any]) -> None:
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(
        {"Version": "2012-10-17", "Statement": list(statements)}))


def curl(url: str, *args: str) -> tuple[int, bytes]:
    """An unsigned request through curl: (status, body)."""
    proc = subprocess.run(["curl", "-s", "-o", "-", "-w", "\n%{http_code}", *args, url],
                          capture_output=True, timeout=30, check=True)
    body, _, status = proc.stdout.rpartition(b"\n")
    return int(status), body


@pytest.fixture
def bucket(s3) -> str:  # type: ignore[no-untyped-def]
    """A new bucket that allows ACLs and public policies (S3's defaults forbid both)."""
    name = f"t-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=name)
    s3.delete_public_access_block(Bucket=name)
    s3.put_bucket_ownership_controls(Bucket=name, OwnershipControls={
        "Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]})
    return name


@pytest.fixture(scope="module")
def bob(squall: SquallProcess) -> dict[str, Any]:
    return add_user(squall)


def test_policy_serves_anonymous_reads_to_curl(s3, bucket: str, squall: SquallProcess) -> None:
    s3.put_object(Bucket=bucket, Key="pub/hello.txt", Body=b"hello, world")
    s3.put_object(Bucket=bucket, Key="private.txt", Body=b"secret")
    url = f"{squall.endpoint}/{bucket}"
    assert curl(f"{url}/pub/hello.txt")[0] == 403  # private by default
    put_policy(s3, bucket, {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                            "Resource": f"arn:aws:s3:::{bucket}/pub/*"})
    assert curl(f"{url}/pub/hello.txt") == (200, b"hello, world")
    status, body = curl(f"{url}/private.txt")
    assert status == 403 and b"AccessDenied" in body
    assert curl(f"{url}/pub/new.txt", "-X", "PUT", "--data-binary", "x")[0] == 403
    assert curl(f"{url}?list-type=2")[0] == 403  # listing is not granted
    s3.delete_bucket_policy(Bucket=bucket)
    assert curl(f"{url}/pub/hello.txt")[0] == 403


def test_deny_wins_over_an_acl_grant(s3, bucket: str, squall: SquallProcess,
                                     bob: dict[str, Any]) -> None:
    s3.put_object(Bucket=bucket, Key="shared.txt", Body=b"shared")
    as_bob = client_of(squall, bob)
    with pytest.raises(ClientError) as exc:
        as_bob.get_object(Bucket=bucket, Key="shared.txt")
    assert code_of(exc) == ("AccessDenied", 403)
    s3.put_object_acl(Bucket=bucket, Key="shared.txt", GrantRead=f'id="{bob["canonical_id"]}"')
    assert as_bob.get_object(Bucket=bucket, Key="shared.txt")["Body"].read() == b"shared"
    put_policy(s3, bucket, {"Effect": "Deny", "Principal": {"AWS": bob["name"]},
                            "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/*"})
    with pytest.raises(ClientError) as exc:
        as_bob.get_object(Bucket=bucket, Key="shared.txt")
    assert code_of(exc) == ("AccessDenied", 403)
    assert s3.get_object(Bucket=bucket, Key="shared.txt")["Body"].read() == b"shared"


def test_source_ip_and_prefix_conditions(s3, bucket: str, squall: SquallProcess,
                                         bob: dict[str, Any]) -> None:
    s3.put_object(Bucket=bucket, Key="public/a.txt", Body=b"a")
    as_bob = client_of(squall, bob)
    arn = f"arn:aws:s3:::{bucket}"
    allow = {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::000000000000:user/"
                                                     f"{bob['name']}"},
             "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": [arn, f"{arn}/*"]}
    deny_loopback = {"Effect": "Deny", "Principal": "*", "Action": "s3:*",
                     "Resource": [arn, f"{arn}/*"],
                     "Condition": {"IpAddress": {"aws:SourceIp": ["127.0.0.0/8", "::1/128"]}}}
    put_policy(s3, bucket, allow)
    assert as_bob.get_object(Bucket=bucket, Key="public/a.txt")["Body"].read() == b"a"
    put_policy(s3, bucket, allow, deny_loopback)  # the tests speak over loopback
    with pytest.raises(ClientError) as exc:
        as_bob.get_object(Bucket=bucket, Key="public/a.txt")
    assert code_of(exc) == ("AccessDenied", 403)
    elsewhere = {**deny_loopback, "Condition": {"IpAddress": {"aws:SourceIp": "169.254.0.0/16"}}}
    put_policy(s3, bucket, allow, elsewhere)
    assert as_bob.get_object(Bucket=bucket, Key="public/a.txt")["Body"].read() == b"a"
    listing = {"Effect": "Allow", "Principal": {"AWS": bob["name"]},
               "Action": "s3:ListBucket", "Resource": arn,
               "Condition": {"StringLike": {"s3:prefix": "public/*"}}}
    put_policy(s3, bucket, listing)
    keys = as_bob.list_objects_v2(Bucket=bucket, Prefix="public/")["Contents"]
    assert [k["Key"] for k in keys] == ["public/a.txt"]
    with pytest.raises(ClientError) as exc:
        as_bob.list_objects_v2(Bucket=bucket)
    assert code_of(exc) == ("AccessDenied", 403)


def test_only_the_owner_manages_the_policy(s3, bucket: str, squall: SquallProcess,
                                           bob: dict[str, Any]) -> None:
    as_bob = client_of(squall, bob)
    text = json.dumps({"Statement": [{"Effect": "Allow", "Principal": "*",
                                      "Action": "s3:GetObject",
                                      "Resource": f"arn:aws:s3:::{bucket}/*"}]})
    for call, extra in ((as_bob.put_bucket_policy, {"Policy": text}),
                        (as_bob.get_bucket_policy, {}), (as_bob.delete_bucket_policy, {}),
                        (as_bob.get_bucket_policy_status, {})):
        with pytest.raises(ClientError) as exc:
            call(Bucket=bucket, **extra)
        assert code_of(exc) == ("AccessDenied", 403)
