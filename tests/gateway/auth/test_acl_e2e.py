"""Owners, ACLs, object ownership and the public access block on a real gateway: two
users and anonymous callers through boto3, the aws CLI and curl."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.gateway.auth.test_users_e2e import client
from tests.gateway.s3api.clients.helpers import make_aws
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    server = SquallProcess(tmp_path_factory.mktemp("acl") / "data").start()
    yield server
    assert server.stop() == 0, server.log()


def name() -> str:
    return f"acl-{uuid.uuid4().hex[:12]}"


def error(call: Any, *args: Any, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(ClientError) as info:
        call(*args, **kwargs)
    response = info.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def open_bucket(s3: Any, *, ownership: str = "ObjectWriter", block: bool = False) -> str:
    """A bucket whose ACLs are enabled; without a public access block unless ``block``."""
    bucket = name()
    s3.create_bucket(Bucket=bucket, ObjectOwnership=ownership)
    if not block:
        s3.delete_public_access_block(Bucket=bucket)
    return bucket


def signed(gateway: SquallProcess, method: str, path: str, body: bytes, *,
           access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY) -> httpx.Response:
    """A raw request signed with SigV4 (for bodies boto3 would refuse to send)."""
    url = f"{gateway.endpoint}{path}"
    request = AWSRequest(method=method, url=url, data=body)
    S3SigV4Auth(Credentials(access_key, secret_key), "s3", "us-east-1").add_auth(request)
    return httpx.request(method, url, content=body, headers=dict(request.headers.items()),
                         timeout=10)


def test_new_buckets_have_an_owner_acls_disabled_and_public_access_blocked(
        s3_alice: Any, alice: dict[str, Any]) -> None:
    bucket = name()
    s3_alice.create_bucket(Bucket=bucket)
    controls = s3_alice.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]
    assert controls["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    block = s3_alice.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert block == {"BlockPublicAcls": True, "IgnorePublicAcls": True,
                     "BlockPublicPolicy": True, "RestrictPublicBuckets": True}
    acl = s3_alice.get_bucket_acl(Bucket=bucket)
    assert acl["Owner"] == {"ID": alice["canonical_id"], "DisplayName": "alice"}
    assert [(g["Grantee"]["ID"], g["Permission"]) for g in acl["Grants"]] == [
        (alice["canonical_id"], "FULL_CONTROL")]
    s3_alice.delete_public_access_block(Bucket=bucket)
    assert error(s3_alice.get_public_access_block, Bucket=bucket) == (
        404, "NoSuchPublicAccessBlockConfiguration")
    s3_alice.delete_bucket_ownership_controls(Bucket=bucket)
    assert error(s3_alice.get_bucket_ownership_controls, Bucket=bucket) == (
        404, "OwnershipControlsNotFoundError")


def test_the_alt_user_and_anonymous_callers_are_refused_on_a_private_bucket(
        s3_alice: Any, s3_bob: Any, anonymous: Any) -> None:
    bucket = name()
    s3_alice.create_bucket(Bucket=bucket)
    s3_alice.put_object(Bucket=bucket, Key="secret", Body=b"alice's")
    for s3 in (s3_bob, anonymous):
        assert error(s3.get_object, Bucket=bucket, Key="secret") == (403, "AccessDenied")
        assert error(s3.list_objects_v2, Bucket=bucket) == (403, "AccessDenied")
        assert error(s3.put_object, Bucket=bucket, Key="x", Body=b"x") == (403, "AccessDenied")
        assert error(s3.delete_object, Bucket=bucket, Key="secret") == (403, "AccessDenied")
        assert error(s3.get_bucket_acl, Bucket=bucket) == (403, "AccessDenied")
        assert error(s3.head_object, Bucket=bucket, Key="secret")[0] == 403
        assert error(s3.head_bucket, Bucket=bucket)[0] == 403
        # A missing key says no more than an existing one.
        assert error(s3.get_object, Bucket=bucket, Key="nothing") == (403, "AccessDenied")
    assert error(s3_bob.delete_bucket, Bucket=bucket) == (403, "AccessDenied")
    # Bucket names are public in S3: a missing bucket is NoSuchBucket for everyone.
    assert error(anonymous.list_objects_v2, Bucket=name()) == (404, "NoSuchBucket")
    assert error(s3_bob.get_object, Bucket=name(), Key="k") == (404, "NoSuchBucket")
    assert error(anonymous.list_buckets) == (403, "AccessDenied")
    # Nothing was lost or changed.
    assert s3_alice.get_object(Bucket=bucket, Key="secret")["Body"].read() == b"alice's"
    assert error(s3_alice.get_object, Bucket=bucket, Key="nothing") == (404, "NoSuchKey")


def test_the_owner_grants_read_by_canonical_id(s3_alice: Any, s3_bob: Any,
                                               bob: dict[str, Any]) -> None:
    bucket = open_bucket(s3_alice)
    s3_alice.put_object(Bucket=bucket, Key="k", Body=b"shared")
    assert error(s3_bob.list_objects_v2, Bucket=bucket) == (403, "AccessDenied")
    s3_alice.put_bucket_acl(Bucket=bucket, GrantRead=f'id="{bob["canonical_id"]}"',
                            GrantFullControl=f'id="{s3_alice_id(s3_alice)}"')
    assert [o["Key"] for o in s3_bob.list_objects_v2(Bucket=bucket)["Contents"]] == ["k"]
    # Bucket READ lists; the object's own ACL decides who reads it.
    assert error(s3_bob.get_object, Bucket=bucket, Key="k") == (403, "AccessDenied")
    assert error(s3_bob.get_object, Bucket=bucket, Key="missing") == (404, "NoSuchKey")
    s3_alice.put_object_acl(Bucket=bucket, Key="k", GrantRead=f'id="{bob["canonical_id"]}"')
    assert s3_bob.get_object(Bucket=bucket, Key="k")["Body"].read() == b"shared"
    grants = s3_alice.get_object_acl(Bucket=bucket, Key="k")["Grants"]
    assert grants == [{"Grantee": {"ID": bob["canonical_id"], "DisplayName": "bob",
                                   "Type": "CanonicalUser"}, "Permission": "READ"}]
    # READ does not let bob write, nor change the ACL.
    assert error(s3_bob.put_object, Bucket=bucket, Key="b", Body=b"") == (403, "AccessDenied")
    assert error(s3_bob.put_object_acl, Bucket=bucket, Key="k", ACL="public-read") == (
        403, "AccessDenied")


def s3_alice_id(s3: Any) -> str:
    return str(s3.list_buckets()["Owner"]["ID"])


def test_a_public_read_object_is_served_without_a_signature(
        gateway: SquallProcess, s3_alice: Any, anonymous: Any, tmp_path: Path) -> None:
    bucket = open_bucket(s3_alice)
    s3_alice.put_object(Bucket=bucket, Key="public.txt", Body=b"for everyone",
                        ACL="public-read")
    s3_alice.put_object(Bucket=bucket, Key="private.txt", Body=b"not for you")
    url = f"{gateway.endpoint}/{bucket}/public.txt"
    got = subprocess.run(["curl", "-sS", "-f", url], capture_output=True, timeout=30,
                         check=False)
    assert got.returncode == 0 and got.stdout == b"for everyone", got.stderr
    refused = subprocess.run(["curl", "-sS", "-w", "%{http_code}",
                              f"{gateway.endpoint}/{bucket}/private.txt"],
                             capture_output=True, text=True, timeout=30, check=False)
    assert refused.stdout.endswith("403") and "<Code>AccessDenied</Code>" in refused.stdout
    body = anonymous.get_object(Bucket=bucket, Key="public.txt")["Body"].read()
    assert body == b"for everyone"
    aws = make_aws(gateway.endpoint, tmp_path / "home")
    out = aws("s3", "cp", f"s3://{bucket}/public.txt", "-", "--no-sign-request").stdout
    assert out == "for everyone"
    denied = aws("s3", "cp", f"s3://{bucket}/private.txt", "-", "--no-sign-request",
                 ok=False)
    assert "403" in denied.stderr or "Forbidden" in denied.stderr
    acl = s3_alice.get_object_acl(Bucket=bucket, Key="public.txt")
    assert {"Grantee": {"Type": "Group", "URI": ALL_USERS}, "Permission": "READ"} in \
        acl["Grants"]
    # A bad signature is still refused, not taken for an anonymous request.
    bad = client(gateway.endpoint, ACCESS_KEY, "x" * 40)
    assert error(bad.get_object, Bucket=bucket, Key="public.txt") == (
        403, "SignatureDoesNotMatch")


def test_a_public_read_write_bucket_takes_anonymous_writes(
        gateway: SquallProcess, s3_alice: Any, anonymous: Any, tmp_path: Path) -> None:
    bucket = open_bucket(s3_alice)
    s3_alice.put_bucket_acl(Bucket=bucket, ACL="public-read-write")
    anonymous.put_object(Bucket=bucket, Key="dropped", Body=b"from nobody")
    keys = [o["Key"] for o in anonymous.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == ["dropped"]
    aws = make_aws(gateway.endpoint, tmp_path / "home")
    listed = aws("s3", "ls", f"s3://{bucket}/", "--no-sign-request").stdout
    assert "dropped" in listed
    # The anonymous writer owns what it wrote: the bucket owner does not read it.
    assert error(s3_alice.get_object, Bucket=bucket, Key="dropped") == (403, "AccessDenied")
    s3_alice.delete_object(Bucket=bucket, Key="dropped")  # bucket WRITE deletes


def test_block_public_acls_refuses_public_acls(s3_alice: Any) -> None:
    bucket = open_bucket(s3_alice, block=True)
    assert error(s3_alice.put_object, Bucket=bucket, Key="k", Body=b"x",
                 ACL="public-read") == (403, "AccessDenied")
    assert error(s3_alice.put_bucket_acl, Bucket=bucket, ACL="public-read") == (
        403, "AccessDenied")
    s3_alice.put_object(Bucket=bucket, Key="k", Body=b"x", ACL="private")
    assert error(s3_alice.put_object_acl, Bucket=bucket, Key="k",
                 GrantRead=f'uri="{ALL_USERS}"') == (403, "AccessDenied")
    assert s3_alice.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"


def test_ignore_public_acls_hides_public_grants(s3_alice: Any, anonymous: Any) -> None:
    bucket = open_bucket(s3_alice)
    s3_alice.put_object(Bucket=bucket, Key="k", Body=b"public", ACL="public-read")
    assert anonymous.get_object(Bucket=bucket, Key="k")["Body"].read() == b"public"
    s3_alice.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration={
        "IgnorePublicAcls": True})
    assert error(anonymous.get_object, Bucket=bucket, Key="k") == (403, "AccessDenied")
    block = s3_alice.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    assert block == {"BlockPublicAcls": False, "IgnorePublicAcls": True,
                     "BlockPublicPolicy": False, "RestrictPublicBuckets": False}
    s3_alice.delete_public_access_block(Bucket=bucket)
    assert anonymous.get_object(Bucket=bucket, Key="k")["Body"].read() == b"public"


def test_bucket_owner_enforced_refuses_acls(s3_alice: Any, s3_bob: Any) -> None:
    bucket = name()
    s3_alice.create_bucket(Bucket=bucket)  # BucketOwnerEnforced by default
    s3_alice.delete_public_access_block(Bucket=bucket)
    assert error(s3_alice.put_object, Bucket=bucket, Key="k", Body=b"x",
                 ACL="public-read") == (400, "AccessControlListNotSupported")
    assert error(s3_alice.put_bucket_acl, Bucket=bucket, ACL="public-read") == (
        400, "AccessControlListNotSupported")
    s3_alice.put_object(Bucket=bucket, Key="k", Body=b"x", ACL="bucket-owner-full-control")
    assert error(s3_alice.put_object_acl, Bucket=bucket, Key="k", ACL="public-read") == (
        400, "AccessControlListNotSupported")
    assert error(s3_alice.create_bucket, Bucket=name(), ACL="public-read") == (
        400, "InvalidBucketAclWithObjectOwnership")
    # Reading ACLs still works and shows the bucket owner's full control.
    grants = s3_alice.get_object_acl(Bucket=bucket, Key="k")["Grants"]
    assert [g["Permission"] for g in grants] == ["FULL_CONTROL"]
    # Going back to ACLs is allowed; enforcing them again needs a private bucket ACL.
    s3_alice.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls={
        "Rules": [{"ObjectOwnership": "ObjectWriter"}]})
    s3_alice.put_bucket_acl(Bucket=bucket, ACL="public-read")
    assert error(s3_alice.put_bucket_ownership_controls, Bucket=bucket, OwnershipControls={
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}) == (
        400, "InvalidBucketAclWithObjectOwnership")


def test_bucket_owner_enforced_gives_the_bucket_owner_every_object(
        s3_alice: Any, s3_bob: Any, bob: dict[str, Any]) -> None:
    bucket = open_bucket(s3_alice, ownership="ObjectWriter")
    s3_alice.put_bucket_acl(Bucket=bucket, GrantWrite=f'id="{bob["canonical_id"]}"',
                            GrantFullControl=f'id="{s3_alice_id(s3_alice)}"')
    s3_bob.put_object(Bucket=bucket, Key="bobs", Body=b"by bob")
    assert error(s3_alice.get_object, Bucket=bucket, Key="bobs") == (403, "AccessDenied")
    s3_alice.put_bucket_acl(Bucket=bucket, ACL="private")
    s3_alice.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls={
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
    assert s3_alice.get_object(Bucket=bucket, Key="bobs")["Body"].read() == b"by bob"


def test_bad_acls_get_s3s_errors(gateway: SquallProcess, s3_alice: Any,
                                 alice: dict[str, Any]) -> None:
    bucket = open_bucket(s3_alice)
    keys = {"access_key": alice["access_key"], "secret_key": alice["secret_key"]}
    for body in (b"<AccessControlPolicy><Owner>", b"<Nope/>",
                 b"<AccessControlPolicy><AccessControlList/></AccessControlPolicy>",
                 (b"<AccessControlPolicy><Owner><ID>x</ID></Owner><AccessControlList><Grant>"
                  b"<Grantee><ID>x</ID></Grantee><Permission>READ</Permission></Grant>"
                  b"</AccessControlList></AccessControlPolicy>"),
                 b"<AccessControlPolicy><Owner><ID>x</ID></Owner><AccessControlList><Grant>"
                 b'<Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
                 b'xsi:type="Group"><URI>' + ALL_USERS.encode() + b"</URI></Grantee>"
                 b"<Permission>EVERYTHING</Permission></Grant>"
                 b"</AccessControlList></AccessControlPolicy>"):
        response = signed(gateway, "PUT", f"/{bucket}?acl", body, **keys)
        assert response.status_code == 400, response.text
        assert "<Code>MalformedACLError</Code>" in response.text
    assert error(s3_alice.put_object, Bucket=bucket, Key="k", Body=b"",
                 ACL="world-readable") == (400, "InvalidArgument")
    assert error(s3_alice.put_bucket_acl, Bucket=bucket,
                 GrantRead='id="' + "0" * 64 + '"') == (400, "InvalidArgument")
    assert error(s3_alice.put_bucket_acl, Bucket=bucket,
                 GrantRead='emailAddress="someone@example.com"') == (
        400, "UnresolvableGrantByEmailAddress")
    assert error(s3_alice.put_object, Bucket=bucket, Key="k", Body=b"", ACL="private",
                 GrantRead=f'uri="{ALL_USERS}"') == (400, "InvalidRequest")
    assert error(s3_alice.create_bucket, Bucket=name(), ObjectOwnership="Nobody") == (
        400, "InvalidArgument")
    # The bucket ACL is unchanged by every refusal.
    grants = s3_alice.get_bucket_acl(Bucket=bucket)["Grants"]
    assert [g["Permission"] for g in grants] == ["FULL_CONTROL"]


def test_list_buckets_shows_each_user_their_own(s3_alice: Any, s3_bob: Any,
                                               s3_admin: Any) -> None:
    mine, theirs = name(), name()
    s3_alice.create_bucket(Bucket=mine)
    s3_bob.create_bucket(Bucket=theirs)
    alices = {b["Name"] for b in s3_alice.list_buckets()["Buckets"]}
    bobs = {b["Name"] for b in s3_bob.list_buckets()["Buckets"]}
    assert mine in alices and theirs not in alices
    assert theirs in bobs and mine not in bobs
    every = {b["Name"] for b in s3_admin.list_buckets()["Buckets"]}
    assert {mine, theirs} <= every
    # A taken name is someone else's: BucketAlreadyExists, not a second owner.
    assert error(s3_bob.create_bucket, Bucket=mine) == (409, "BucketAlreadyExists")
    s3_alice.create_bucket(Bucket=mine)  # us-east-1: re-creating one's own bucket is OK


def test_copies_need_read_on_the_source_and_do_not_copy_its_acl(
        s3_alice: Any, s3_bob: Any, anonymous: Any) -> None:
    source = open_bucket(s3_alice)
    s3_alice.put_object(Bucket=source, Key="src", Body=b"data", ACL="public-read")
    s3_alice.put_object(Bucket=source, Key="hidden", Body=b"data")
    target = open_bucket(s3_bob)
    s3_bob.copy_object(Bucket=target, Key="copy", CopySource={"Bucket": source, "Key": "src"})
    assert error(s3_bob.copy_object, Bucket=target, Key="copy2",
                 CopySource={"Bucket": source, "Key": "hidden"}) == (403, "AccessDenied")
    # The copy is bob's and private.
    assert error(anonymous.get_object, Bucket=target, Key="copy") == (403, "AccessDenied")
    assert s3_bob.get_object(Bucket=target, Key="copy")["Body"].read() == b"data"


def test_the_admin_reaches_every_bucket(s3_alice: Any, s3_admin: Any, s3_bob: Any,
                                        bob: dict[str, Any]) -> None:
    bucket = name()
    s3_alice.create_bucket(Bucket=bucket)
    s3_alice.put_object(Bucket=bucket, Key="k", Body=b"v")
    assert s3_admin.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"
    s3_admin.delete_object(Bucket=bucket, Key="k")
    s3_admin.delete_bucket(Bucket=bucket)
    assert error(s3_admin.get_bucket_acl, Bucket=bucket) == (404, "NoSuchBucket")
    assert error(s3_alice.get_bucket_acl, Bucket=bucket) == (404, "NoSuchBucket")
    # The settings went with the bucket: the name is free for anyone.
    s3_bob.create_bucket(Bucket=bucket)
    assert s3_bob.get_bucket_acl(Bucket=bucket)["Owner"]["ID"] == bob["canonical_id"]


def policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def test_a_deny_policy_wins_over_an_acl_grant(s3_alice: Any, s3_bob: Any,
                                              bob: dict[str, Any], anonymous: Any) -> None:
    bucket = open_bucket(s3_alice)
    s3_alice.put_object(Bucket=bucket, Key="open/k", Body=b"v", ACL="public-read")
    s3_alice.put_object(Bucket=bucket, Key="closed/k", Body=b"v", ACL="public-read")
    assert anonymous.get_object(Bucket=bucket, Key="closed/k")["Body"].read() == b"v"
    s3_alice.put_bucket_policy(Bucket=bucket, Policy=policy({
        "Effect": "Deny", "Principal": "*", "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{bucket}/closed/*"}))
    for s3 in (anonymous, s3_bob):
        assert error(s3.get_object, Bucket=bucket, Key="closed/k") == (403, "AccessDenied")
        assert s3.get_object(Bucket=bucket, Key="open/k")["Body"].read() == b"v"
    # The bucket owner is denied too; only the admin is above policies.
    assert error(s3_alice.get_object, Bucket=bucket, Key="closed/k") == (403, "AccessDenied")


def test_delete_objects_is_decided_key_by_key(s3_alice: Any, s3_bob: Any,
                                             bob: dict[str, Any]) -> None:
    bucket = open_bucket(s3_alice)
    for key in ("keep/a", "free/b"):
        s3_alice.put_object(Bucket=bucket, Key=key, Body=b"v")
    s3_alice.put_bucket_acl(Bucket=bucket, GrantWrite=f'id="{bob["canonical_id"]}"',
                            GrantFullControl=f'id="{s3_alice_id(s3_alice)}"')
    s3_alice.put_bucket_policy(Bucket=bucket, Policy=policy({
        "Effect": "Deny", "Principal": {"AWS": "bob"}, "Action": "s3:DeleteObject",
        "Resource": f"arn:aws:s3:::{bucket}/keep/*"}))
    answer = s3_bob.delete_objects(Bucket=bucket, Delete={
        "Objects": [{"Key": "keep/a"}, {"Key": "free/b"}]})
    assert [d["Key"] for d in answer["Deleted"]] == ["free/b"]
    assert [(e["Key"], e["Code"]) for e in answer["Errors"]] == [("keep/a", "AccessDenied")]
    assert [o["Key"] for o in s3_alice.list_objects_v2(Bucket=bucket)["Contents"]] == [
        "keep/a"]


def test_public_policies_and_the_public_access_block(s3_alice: Any, anonymous: Any) -> None:
    bucket = open_bucket(s3_alice, block=True)
    s3_alice.put_object(Bucket=bucket, Key="k", Body=b"v")
    public = policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                     "Resource": f"arn:aws:s3:::{bucket}/*"})
    assert error(s3_alice.put_bucket_policy, Bucket=bucket, Policy=public) == (
        403, "AccessDenied")  # BlockPublicPolicy
    s3_alice.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration={
        "RestrictPublicBuckets": True})
    s3_alice.put_bucket_policy(Bucket=bucket, Policy=public)
    assert error(anonymous.get_object, Bucket=bucket, Key="k") == (403, "AccessDenied")
    s3_alice.delete_public_access_block(Bucket=bucket)
    assert anonymous.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v"


def test_each_version_has_its_own_acl(s3_alice: Any, anonymous: Any) -> None:
    bucket = open_bucket(s3_alice)
    s3_alice.put_bucket_versioning(Bucket=bucket,
                                   VersioningConfiguration={"Status": "Enabled"})
    v1 = s3_alice.put_object(Bucket=bucket, Key="k", Body=b"one",
                             ACL="public-read")["VersionId"]
    v2 = s3_alice.put_object(Bucket=bucket, Key="k", Body=b"two")["VersionId"]
    assert error(anonymous.get_object, Bucket=bucket, Key="k") == (403, "AccessDenied")
    assert anonymous.get_object(Bucket=bucket, Key="k", VersionId=v1)["Body"].read() == b"one"
    s3_alice.put_object_acl(Bucket=bucket, Key="k", VersionId=v2, ACL="public-read")
    assert anonymous.get_object(Bucket=bucket, Key="k")["Body"].read() == b"two"
    s3_alice.put_object_acl(Bucket=bucket, Key="k", VersionId=v1, ACL="private")
    assert error(anonymous.get_object, Bucket=bucket, Key="k", VersionId=v1) == (
        403, "AccessDenied")


def test_anonymous_bodies_and_presigned_urls(gateway: SquallProcess, s3_alice: Any) -> None:
    bucket = open_bucket(s3_alice)
    s3_alice.put_bucket_acl(Bucket=bucket, ACL="public-read-write")
    url = f"{gateway.endpoint}/{bucket}/raw"
    chunked = httpx.put(url, content=b"x", timeout=10, headers={
        "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"})
    assert chunked.status_code == 403 and "<Code>AccessDenied</Code>" in chunked.text
    wrong = httpx.put(url, content=b"x", timeout=10,
                      headers={"x-amz-content-sha256": "0" * 64})
    assert wrong.status_code == 400 and "XAmzContentSHA256Mismatch" in wrong.text
    assert httpx.put(url, content=b"raw body", timeout=10).status_code == 200
    assert httpx.get(url, timeout=10).status_code == 403  # the anonymous writer's object
    s3_alice.put_object(Bucket=bucket, Key="shared", Body=b"by link")
    link = s3_alice.generate_presigned_url("get_object", Params={"Bucket": bucket,
                                                                 "Key": "shared"})
    assert httpx.get(link, timeout=10).content == b"by link"


def test_a_multipart_upload_keeps_the_acl_it_was_created_with(s3_alice: Any,
                                                               anonymous: Any) -> None:
    bucket = open_bucket(s3_alice)
    upload = s3_alice.create_multipart_upload(Bucket=bucket, Key="big", ACL="public-read")
    part = s3_alice.upload_part(Bucket=bucket, Key="big", UploadId=upload["UploadId"],
                                PartNumber=1, Body=b"parts")
    s3_alice.complete_multipart_upload(
        Bucket=bucket, Key="big", UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert anonymous.get_object(Bucket=bucket, Key="big")["Body"].read() == b"parts"
    head = s3_alice.head_object(Bucket=bucket, Key="big")
    assert head["Metadata"] == {}  # the ACL entry is never shown as metadata
