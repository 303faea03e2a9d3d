"""Owners in listings, concurrent changes of a bucket's access settings, owners kept by
appends and the ``aws-exec-read`` canned ACL, on real gateways with two users and an
anonymous client (boto3 and the aws CLI)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.auth.conftest import anonymous_client
from tests.gateway.auth.test_acl_e2e import error, open_bucket
from tests.gateway.auth.test_users_e2e import add_user, client
from tests.gateway.s3api.clients.helpers import make_aws
from tests.support.server import SquallProcess


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    # One worker: settings changes are serialized per process (docs/security.md).
    server = SquallProcess(tmp_path_factory.mktemp("owners") / "data",
                           ["--workers", "1"]).start()
    yield server
    assert server.stop() == 0, server.log()


def who(user: dict[str, Any], name: str) -> dict[str, str]:
    return {"ID": user["canonical_id"], "DisplayName": name}


def shared_bucket(s3_owner: Any, guest: dict[str, Any]) -> str:
    """An ObjectWriter bucket of ``s3_owner`` that ``guest`` may list and write."""
    bucket = open_bucket(s3_owner)
    grantee = f'id="{guest["canonical_id"]}"'
    s3_owner.put_bucket_acl(Bucket=bucket, GrantRead=grantee, GrantWrite=grantee)
    return bucket


def test_list_buckets_names_the_caller(s3_alice: Any, alice: dict[str, Any]) -> None:
    assert s3_alice.list_buckets()["Owner"] == who(alice, "alice")


def test_object_listings_show_each_objects_owner(
        gateway: SquallProcess, s3_alice: Any, s3_bob: Any, alice: dict[str, Any],
        bob: dict[str, Any], tmp_path: Path) -> None:
    bucket = shared_bucket(s3_alice, bob)
    s3_alice.put_object(Bucket=bucket, Key="a", Body=b"a")
    s3_bob.put_object(Bucket=bucket, Key="b", Body=b"b")
    expected = {"a": who(alice, "alice"), "b": who(bob, "bob")}

    v1 = s3_bob.list_objects(Bucket=bucket)["Contents"]
    assert {o["Key"]: o["Owner"] for o in v1} == expected
    v2 = s3_alice.list_objects_v2(Bucket=bucket, FetchOwner=True)["Contents"]
    assert {o["Key"]: o["Owner"] for o in v2} == expected
    assert all("Owner" not in o for o in s3_alice.list_objects_v2(Bucket=bucket)["Contents"])
    versions = s3_alice.list_object_versions(Bucket=bucket)["Versions"]
    assert {v["Key"]: v["Owner"] for v in versions} == expected

    aws = make_aws(gateway.endpoint, tmp_path / "home", access_key=alice["access_key"],
                   secret_key=alice["secret_key"])
    listed = json.loads(aws("s3api", "list-objects-v2", "--bucket", bucket,
                            "--fetch-owner").stdout)["Contents"]
    assert {o["Key"]: o["Owner"]["ID"] for o in listed} == {
        k: v["ID"] for k, v in expected.items()}


def test_version_listings_show_each_versions_owner(
        s3_alice: Any, s3_bob: Any, alice: dict[str, Any], bob: dict[str, Any]) -> None:
    bucket = shared_bucket(s3_alice, bob)
    s3_alice.put_bucket_versioning(Bucket=bucket,
                                   VersioningConfiguration={"Status": "Enabled"})
    s3_alice.put_object(Bucket=bucket, Key="k", Body=b"1")
    s3_bob.put_object(Bucket=bucket, Key="k", Body=b"2")
    s3_bob.delete_object(Bucket=bucket, Key="k")
    listed = s3_alice.list_object_versions(Bucket=bucket)
    owners = [v["Owner"] for v in sorted(listed["Versions"],
                                         key=lambda v: v["LastModified"])]
    assert sorted(o["DisplayName"] for o in owners) == ["alice", "bob"]
    latest = next(v for v in listed["Versions"] if v["Owner"]["DisplayName"] == "bob")
    assert s3_bob.get_object(Bucket=bucket, Key="k",
                             VersionId=latest["VersionId"])["Body"].read() == b"2"
    # Delete markers record no owner: they are shown as the bucket owner's.
    assert [m["Owner"] for m in listed["DeleteMarkers"]] == [who(alice, "alice")]


def test_upload_listings_show_the_initiator(
        s3_alice: Any, s3_bob: Any, bob: dict[str, Any]) -> None:
    bucket = shared_bucket(s3_alice, bob)
    upload = s3_bob.create_multipart_upload(Bucket=bucket, Key="big")["UploadId"]
    try:
        uploads = s3_alice.list_multipart_uploads(Bucket=bucket)["Uploads"]
        assert [(u["Key"], u["Initiator"], u["Owner"]) for u in uploads] == [
            ("big", who(bob, "bob"), who(bob, "bob"))]
    finally:
        s3_bob.abort_multipart_upload(Bucket=bucket, Key="big", UploadId=upload)


def test_bucket_owner_enforced_lists_the_bucket_owner(
        s3_alice: Any, s3_admin: Any, alice: dict[str, Any]) -> None:
    bucket = f"own-{uuid.uuid4().hex[:12]}"
    s3_alice.create_bucket(Bucket=bucket)  # BucketOwnerEnforced, the default
    s3_admin.put_object(Bucket=bucket, Key="by-admin", Body=b"x")
    s3_alice.put_object(Bucket=bucket, Key="by-alice", Body=b"x")
    for s3 in (s3_alice, s3_admin):
        listed = s3.list_objects_v2(Bucket=bucket, FetchOwner=True)["Contents"]
        assert [o["Owner"] for o in listed] == [who(alice, "alice")] * 2


def test_concurrent_settings_changes_lose_nothing(
        s3_alice: Any, bob: dict[str, Any]) -> None:
    bucket = open_bucket(s3_alice)  # ObjectWriter, no public access block
    grantee = f'id="{bob["canonical_id"]}"'
    block = {"BlockPublicAcls": False, "IgnorePublicAcls": True,
             "BlockPublicPolicy": False, "RestrictPublicBuckets": True}
    calls = [
        lambda: s3_alice.put_bucket_acl(Bucket=bucket, GrantRead=grantee),
        lambda: s3_alice.put_public_access_block(
            Bucket=bucket, PublicAccessBlockConfiguration=block),
        lambda: s3_alice.put_bucket_ownership_controls(
            Bucket=bucket, OwnershipControls={
                "Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}),
    ]
    with ThreadPoolExecutor(max_workers=20) as pool:
        for future in [pool.submit(calls[i % 3]) for i in range(20)]:
            future.result()
    grants = s3_alice.get_bucket_acl(Bucket=bucket)["Grants"]
    assert [(g["Grantee"].get("ID"), g["Permission"]) for g in grants] == [
        (bob["canonical_id"], "READ")]
    assert s3_alice.get_public_access_block(
        Bucket=bucket)["PublicAccessBlockConfiguration"] == block
    assert s3_alice.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"] == {
        "Rules": [{"ObjectOwnership": "BucketOwnerPreferred"}]}


def test_aws_exec_read_keeps_the_owners_grant(
        gateway: SquallProcess, s3_alice: Any, alice: dict[str, Any],
        tmp_path: Path) -> None:
    bucket = open_bucket(s3_alice)
    s3_alice.put_object(Bucket=bucket, Key="ami", Body=b"bundle", ACL="aws-exec-read")
    acl = s3_alice.get_object_acl(Bucket=bucket, Key="ami")
    assert acl["Owner"] == who(alice, "alice")
    assert [(g["Grantee"]["ID"], g["Permission"]) for g in acl["Grants"]] == [
        (alice["canonical_id"], "FULL_CONTROL")]
    assert error(anonymous_client(gateway.endpoint).get_object, Bucket=bucket,
                 Key="ami") == (403, "AccessDenied")
    s3_alice.put_bucket_acl(Bucket=bucket, ACL="aws-exec-read")
    # With ACLs disabled it grants beyond the bucket owner: refused, as S3 refuses it.
    enforced = f"own-{uuid.uuid4().hex[:12]}"
    s3_alice.create_bucket(Bucket=enforced)
    assert error(s3_alice.put_object, Bucket=enforced, Key="ami", Body=b"x",
                 ACL="aws-exec-read") == (400, "AccessControlListNotSupported")
    assert error(s3_alice.put_bucket_acl, Bucket=enforced, ACL="aws-exec-read") == (
        400, "AccessControlListNotSupported")
    assert error(s3_alice.create_bucket, Bucket=f"own-{uuid.uuid4().hex[:12]}",
                 ACL="aws-exec-read") == (400, "InvalidBucketAclWithObjectOwnership")
    aws = make_aws(gateway.endpoint, tmp_path / "home", access_key=alice["access_key"],
                   secret_key=alice["secret_key"])
    src = tmp_path / "bundle"
    src.write_bytes(b"bundle")
    aws("s3", "cp", str(src), f"s3://{bucket}/cli-ami", "--acl", "aws-exec-read")
    refused = aws("s3", "cp", str(src), f"s3://{enforced}/cli-ami", "--acl",
                  "aws-exec-read", ok=False)
    assert "AccessControlListNotSupported" in refused.stderr


# -- appends (blobseer_like, ranged writes) ----------------------------------------------


@pytest.fixture(scope="module")
def striped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    base = tmp_path_factory.mktemp("owners-append")
    providers = ",".join(str(base / f"p{i}") for i in range(3))
    server = SquallProcess(base / "data", ["--backend", f"blobseer_like:{providers}?chunk=64KiB",
                                           "--cache-size", "0"]).start()
    yield server
    assert server.stop() == 0, server.log()


def test_appends_keep_the_owner_and_acl(striped: SquallProcess) -> None:
    alice, bob = add_user(striped, "alice"), add_user(striped, "bob")
    s3_alice = client(striped.endpoint, alice["access_key"], alice["secret_key"])
    s3_bob = client(striped.endpoint, bob["access_key"], bob["secret_key"])
    bucket = shared_bucket(s3_alice, bob)
    s3_bob.put_object(Bucket=bucket, Key="log", Body=b"one\n", WriteOffsetBytes=0,
                      ACL="public-read")
    s3_bob.put_object(Bucket=bucket, Key="log", Body=b"two\n", WriteOffsetBytes=4)
    acl = s3_bob.get_object_acl(Bucket=bucket, Key="log")
    assert acl["Owner"] == who(bob, "bob")
    assert anonymous_client(striped.endpoint).get_object(
        Bucket=bucket, Key="log")["Body"].read() == b"one\ntwo\n"
    listed = s3_alice.list_objects(Bucket=bucket)["Contents"]
    assert [o["Owner"] for o in listed] == [who(bob, "bob")]
    # A private object appended by bob stays bob's: the bucket owner may not read it.
    s3_bob.put_object(Bucket=bucket, Key="own", Body=b"one\n", WriteOffsetBytes=0)
    s3_bob.put_object(Bucket=bucket, Key="own", Body=b"two\n", WriteOffsetBytes=4)
    assert error(s3_alice.get_object, Bucket=bucket, Key="own") == (403, "AccessDenied")
    assert s3_bob.get_object(Bucket=bucket, Key="own")["Body"].read() == b"one\ntwo\n"
