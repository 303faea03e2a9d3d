"""A gateway whose new buckets have ACLs, as S3 buckets made before 2023 had
(``--default-object-ownership ObjectWriter``, whose public access block default is none):
the canned-ACL cases of S3 conformance suites through boto3, the aws CLI and s3cmd (bucket
and object ACLs, grants to another user, anonymous reads of public-read buckets, CORS on
public buckets)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.auth.conftest import anonymous_client
from tests.gateway.auth.test_acl_e2e import error
from tests.gateway.auth.test_users_e2e import add_user, client
from tests.gateway.s3api.clients.helpers import Cli, make_aws, make_s3cmd
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    server = SquallProcess(tmp_path_factory.mktemp("legacy-acl") / "data",
                           ["--default-object-ownership", "ObjectWriter"]).start()
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def alice(gateway: SquallProcess) -> Any:
    user = add_user(gateway, "alice")
    return client(gateway.endpoint, user["access_key"], user["secret_key"])


@pytest.fixture(scope="module")
def bob(gateway: SquallProcess) -> tuple[Any, dict[str, Any]]:
    user = add_user(gateway, "bob")
    return client(gateway.endpoint, user["access_key"], user["secret_key"]), user


@pytest.fixture(scope="module")
def anonymous(gateway: SquallProcess) -> Any:
    return anonymous_client(gateway.endpoint)


@pytest.fixture
def aws(gateway: SquallProcess, tmp_path: Path) -> Cli:
    return make_aws(gateway.endpoint, tmp_path / "aws-home")


@pytest.fixture
def s3cmd(gateway: SquallProcess, tmp_path: Path) -> Cli:
    return make_s3cmd(gateway.endpoint, tmp_path / "s3cmd-home")


def name() -> str:
    return f"legacy-{uuid.uuid4().hex[:12]}"


def public_reads(grants: list[dict[str, Any]]) -> list[str]:
    return [g["Permission"] for g in grants if g["Grantee"].get("URI") == ALL_USERS]


def test_new_buckets_have_acls_and_no_public_access_block(alice: Any) -> None:
    bucket = name()
    alice.create_bucket(Bucket=bucket)
    rules = alice.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]["Rules"]
    assert rules == [{"ObjectOwnership": "ObjectWriter"}]
    assert error(alice.get_public_access_block, Bucket=bucket) == \
        (404, "NoSuchPublicAccessBlockConfiguration")
    # A request that chooses is still served as it asks.
    enforced = name()
    alice.create_bucket(Bucket=enforced, ObjectOwnership="BucketOwnerEnforced")
    assert error(alice.put_object, Bucket=enforced, Key="k", Body=b"x",
                     ACL="public-read") == (400, "AccessControlListNotSupported")


def test_public_read_bucket_and_objects_serve_anonymous_reads(alice: Any,
                                                              anonymous: Any) -> None:
    bucket = name()
    alice.create_bucket(Bucket=bucket, ACL="public-read")
    assert public_reads(alice.get_bucket_acl(Bucket=bucket)["Grants"]) == ["READ"]
    alice.put_object(Bucket=bucket, Key="open", Body=b"for all", ACL="public-read")
    alice.put_object(Bucket=bucket, Key="closed", Body=b"mine")
    listed = anonymous.list_objects(Bucket=bucket)
    assert sorted(o["Key"] for o in listed["Contents"]) == ["closed", "open"]
    assert anonymous.get_object(Bucket=bucket, Key="open")["Body"].read() == b"for all"
    assert error(anonymous.get_object, Bucket=bucket, Key="closed")[0] == 403
    assert error(anonymous.put_object, Bucket=bucket, Key="new", Body=b"x")[0] == 403
    # Canned ACLs change both ways.
    alice.put_object_acl(Bucket=bucket, Key="closed", ACL="public-read")
    assert anonymous.get_object(Bucket=bucket, Key="closed")["Body"].read() == b"mine"
    alice.put_bucket_acl(Bucket=bucket, ACL="private")
    assert error(anonymous.list_objects, Bucket=bucket)[0] == 403
    alice.put_bucket_acl(Bucket=bucket, ACL="public-read-write")
    anonymous.put_object(Bucket=bucket, Key="dropped", Body=b"anon")
    # ObjectWriter: the anonymous writer owns it; the bucket owner sees it listed only.
    assert "dropped" in [o["Key"] for o in alice.list_objects(Bucket=bucket)["Contents"]]
    assert error(alice.get_object, Bucket=bucket, Key="dropped")[0] == 403


def test_grants_to_another_user(alice: Any, bob: tuple[Any, dict[str, Any]]) -> None:
    s3_bob, user = bob
    bucket = name()
    alice.create_bucket(Bucket=bucket)
    alice.put_object(Bucket=bucket, Key="k", Body=b"shared")
    assert error(s3_bob.get_object, Bucket=bucket, Key="k")[0] == 403
    alice.put_object_acl(Bucket=bucket, Key="k", GrantRead=f"id={user['canonical_id']}")
    assert s3_bob.get_object(Bucket=bucket, Key="k")["Body"].read() == b"shared"
    owner_id = alice.get_bucket_acl(Bucket=bucket)["Owner"]["ID"]
    alice.put_bucket_acl(Bucket=bucket, GrantWrite=f"id={user['canonical_id']}",
                         GrantFullControl=f"id={owner_id}")
    s3_bob.put_object(Bucket=bucket, Key="from-bob", Body=b"b")
    # ObjectWriter: bob owns what he wrote.
    acl = s3_bob.get_object_acl(Bucket=bucket, Key="from-bob")
    assert acl["Owner"]["ID"] == user["canonical_id"]


def test_cors_on_a_public_bucket(gateway: SquallProcess, alice: Any) -> None:
    bucket = name()
    alice.create_bucket(Bucket=bucket, ACL="public-read")
    alice.put_object(Bucket=bucket, Key="page", Body=b"<p>", ACL="public-read")
    alice.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [
        {"AllowedOrigins": ["*.get"], "AllowedMethods": ["GET"]},
        {"AllowedOrigins": ["*.put"], "AllowedMethods": ["PUT"]}]})
    url = f"{gateway.endpoint}/{bucket}"
    listing = httpx.get(url, headers={"Origin": "example.get"})
    assert listing.status_code == 200
    assert listing.headers["access-control-allow-origin"] == "example.get"
    assert listing.headers["access-control-allow-methods"] == "GET"
    preflight = httpx.options(f"{url}/page", headers={
        "Origin": "example.put", "Access-Control-Request-Method": "PUT"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-methods"] == "PUT"
    refused = httpx.options(f"{url}/page", headers={
        "Origin": "example.put", "Access-Control-Request-Method": "DELETE"})
    assert refused.status_code == 403
    got = httpx.get(f"{url}/page", headers={"Origin": "example.get"})
    assert (got.status_code, got.content) == (200, b"<p>")
    assert got.headers["access-control-allow-origin"] == "example.get"


def test_the_aws_cli_sets_canned_acls(aws: Cli, anonymous: Any, tmp_path: Path) -> None:
    bucket = name()
    aws("s3api", "create-bucket", "--bucket", bucket, "--acl", "public-read")
    src = tmp_path / "f.txt"
    src.write_bytes(b"cli")
    aws("s3", "cp", str(src), f"s3://{bucket}/f.txt", "--acl", "public-read")
    assert anonymous.get_object(Bucket=bucket, Key="f.txt")["Body"].read() == b"cli"
    acl = json.loads(aws("s3api", "get-object-acl", "--bucket", bucket, "--key",
                         "f.txt").stdout)
    assert public_reads(acl["Grants"]) == ["READ"]
    aws("s3api", "put-object-acl", "--bucket", bucket, "--key", "f.txt", "--acl", "private")
    assert error(anonymous.get_object, Bucket=bucket, Key="f.txt")[0] == 403


def test_s3cmd_setacl(s3cmd: Cli, gateway: SquallProcess, anonymous: Any,
                      tmp_path: Path) -> None:
    admin = client(gateway.endpoint, ACCESS_KEY, SECRET_KEY)
    bucket = name()
    s3cmd("mb", f"s3://{bucket}")
    src = tmp_path / "g.txt"
    src.write_bytes(b"s3cmd")
    s3cmd("put", str(src), f"s3://{bucket}/g.txt")
    assert error(anonymous.get_object, Bucket=bucket, Key="g.txt")[0] == 403
    s3cmd("setacl", "--acl-public", f"s3://{bucket}/g.txt")
    assert anonymous.get_object(Bucket=bucket, Key="g.txt")["Body"].read() == b"s3cmd"
    s3cmd("setacl", "--acl-public", f"s3://{bucket}")
    assert [o["Key"] for o in anonymous.list_objects(Bucket=bucket)["Contents"]] == ["g.txt"]
    s3cmd("setacl", "--acl-private", "--recursive", f"s3://{bucket}")
    assert error(anonymous.get_object, Bucket=bucket, Key="g.txt")[0] == 403
    info = s3cmd("info", f"s3://{bucket}/g.txt").stdout
    assert "*anon*" not in info
    assert admin.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"][
        "Rules"] == [{"ObjectOwnership": "ObjectWriter"}]
