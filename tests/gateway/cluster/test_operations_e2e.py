"""Multipart uploads, copies and bucket operations across members; the ring view and
client-side routing; peer traffic that clients cannot spoof."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from gateway.cluster.client import fetch_ring, owner_url, route_to_owners
from gateway.cluster.ring import HASH_NAME
from tests.gateway.cluster.conftest import Cluster
from tests.support.server import ACCESS_KEY, SECRET_KEY

PART = 64 * 1024


def test_multipart_upload_with_parts_through_every_member(cluster: Cluster,
                                                         cbucket: str) -> None:
    key = "big/object.bin"
    owner = cluster.owner(cbucket, key)
    starter = (owner + 1) % 3  # not the owner: the upload still belongs to the owner
    upload = cluster.clients[starter].create_multipart_upload(Bucket=cbucket, Key=key)
    upload_id = upload["UploadId"]
    for client in cluster.clients:
        listed = client.list_multipart_uploads(Bucket=cbucket).get("Uploads", [])
        assert [(u["Key"], u["UploadId"]) for u in listed] == [(key, upload_id)]
    parts = [os.urandom(PART) for _ in range(5)] + [b"tail"]
    etags = []
    for number, data in enumerate(parts, 1):
        client = cluster.clients[number % 3]
        etags.append(client.upload_part(Bucket=cbucket, Key=key, UploadId=upload_id,
                                        PartNumber=number, Body=data)["ETag"])
    for client in cluster.clients:
        listed_parts = client.list_parts(Bucket=cbucket, Key=key, UploadId=upload_id)
        assert [p["ETag"] for p in listed_parts["Parts"]] == etags
    cluster.clients[(owner + 2) % 3].complete_multipart_upload(
        Bucket=cbucket, Key=key, UploadId=upload_id, MultipartUpload={
            "Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]})
    for client in cluster.clients:
        assert client.get_object(Bucket=cbucket, Key=key)["Body"].read() == b"".join(parts)
        assert client.list_multipart_uploads(Bucket=cbucket).get("Uploads", []) == []
    with pytest.raises(ClientError, match="NoSuchUpload"):
        cluster.clients[starter].abort_multipart_upload(Bucket=cbucket, Key=key,
                                                        UploadId=upload_id)


def test_copies_across_owners(cluster: Cluster, cbucket: str) -> None:
    src = cluster.key_owned_by(0, cbucket, "src")
    dst = cluster.key_owned_by(1, cbucket, "dst")
    data = os.urandom(300_000)
    cluster.clients[1].put_object(Bucket=cbucket, Key=src, Body=data, Metadata={"a": "1"})
    # sent to member 2, forwarded to the destination's owner (1), which reads the
    # source from its owner (0): the source is unflushed, only member 0 has it
    cluster.clients[2].copy_object(Bucket=cbucket, Key=dst,
                                   CopySource={"Bucket": cbucket, "Key": src})
    for client in cluster.clients:
        got = client.get_object(Bucket=cbucket, Key=dst)
        assert got["Body"].read() == data and got["Metadata"] == {"a": "1"}
    newer = os.urandom(1000)
    cluster.clients[0].put_object(Bucket=cbucket, Key=src, Body=newer)
    cluster.clients[0].copy_object(Bucket=cbucket, Key=dst, MetadataDirective="REPLACE",
                                   CopySource={"Bucket": cbucket, "Key": src})
    assert cluster.clients[2].get_object(Bucket=cbucket, Key=dst)["Body"].read() == newer
    with pytest.raises(ClientError, match="NoSuchKey"):
        cluster.clients[2].copy_object(Bucket=cbucket, Key=dst,
                                       CopySource={"Bucket": cbucket, "Key": src + "-none"})
    with pytest.raises(ClientError, match="PreconditionFailed"):
        cluster.clients[2].copy_object(Bucket=cbucket, Key=dst, CopySourceIfMatch='"0"',
                                       CopySource={"Bucket": cbucket, "Key": src})
    # a part copied from a range of a source another member owns
    upload = cluster.clients[2].create_multipart_upload(Bucket=cbucket, Key=dst)
    part = cluster.clients[0].upload_part_copy(
        Bucket=cbucket, Key=dst, UploadId=upload["UploadId"], PartNumber=1,
        CopySource={"Bucket": cbucket, "Key": src}, CopySourceRange="bytes=10-109")
    cluster.clients[1].complete_multipart_upload(
        Bucket=cbucket, Key=dst, UploadId=upload["UploadId"], MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": part["CopyPartResult"]["ETag"]}]})
    assert cluster.clients[2].get_object(Bucket=cbucket, Key=dst)["Body"].read() == \
        newer[10:110]


def test_delete_objects_and_tagging_reach_every_owner(cluster: Cluster, cbucket: str) -> None:
    keys = [cluster.key_owned_by(n, cbucket, f"multi{n}") for n in range(3)]
    for key in keys:
        cluster.clients[0].put_object(Bucket=cbucket, Key=key, Body=b"x")
    cluster.clients[1].put_object_tagging(Bucket=cbucket, Key=keys[2], Tagging={
        "TagSet": [{"Key": "t", "Value": "v"}]})
    assert cluster.clients[0].get_object_tagging(Bucket=cbucket, Key=keys[2])["TagSet"] == \
        [{"Key": "t", "Value": "v"}]
    result = cluster.clients[1].delete_objects(Bucket=cbucket, Delete={
        "Objects": [{"Key": k} for k in keys]})
    assert sorted(d["Key"] for d in result["Deleted"]) == sorted(keys)
    for client in cluster.clients:
        assert client.list_objects_v2(Bucket=cbucket).get("Contents", []) == []


@pytest.fixture
def unthrottled(tmp_path: Path) -> Iterator[Cluster]:
    """A cluster of its own whose flushes run when asked: the package's 1 B/s backend
    owes days after any other test's large flush, and DeleteBucket waits for the
    bucket's flush on every member."""
    running = Cluster(tmp_path, args=("--inactivity-delay", "3600")).start()
    yield running
    running.stop()


def test_delete_bucket_waits_for_every_member(unthrottled: Cluster) -> None:
    cluster = unthrottled
    bucket = "c-delete-me"
    cluster.clients[0].create_bucket(Bucket=bucket)
    key = cluster.key_owned_by(1, bucket)
    cluster.clients[2].put_object(Bucket=bucket, Key=key, Body=b"unflushed on member 1")
    with pytest.raises(ClientError, match="BucketNotEmpty"):
        cluster.clients[0].delete_bucket(Bucket=bucket)
    # Uploads in progress go with the bucket, held by any member (S3 aborts them too).
    cluster.clients[2].create_multipart_upload(Bucket=bucket,
                                               Key=cluster.key_owned_by(1, bucket, "mpu"))
    cluster.clients[0].create_multipart_upload(Bucket=bucket,
                                               Key=cluster.key_owned_by(2, bucket, "mpu"))
    cluster.clients[0].delete_object(Bucket=bucket, Key=key)  # a deletion to flush
    cluster.clients[2].delete_bucket(Bucket=bucket)
    for client in cluster.clients:
        with pytest.raises(ClientError, match="NoSuchBucket"):
            client.put_object(Bucket=bucket, Key=key, Body=b"after the delete")
    cluster.clients[0].create_bucket(Bucket=bucket)
    with pytest.raises(ClientError, match="404"):
        cluster.clients[1].head_object(Bucket=bucket, Key=key)
    for client in cluster.clients:  # the uploads went with the old bucket
        assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    cluster.clients[1].delete_bucket(Bucket=bucket)


def test_ring_view_and_client_side_routing(cluster: Cluster, cbucket: str) -> None:
    ring = fetch_ring(cluster.nodes[1].endpoint)
    assert ring["hash"] == HASH_NAME and ring["self"] == cluster.urls[1]
    assert ring["coordinator"] and ring["serving"] and ring["revision"] > 0
    assert sorted(m["url"] for m in ring["members"]) == sorted(cluster.urls)
    assert [m["url"] for m in ring["members"] if m["self"]] == [cluster.urls[1]]
    assert {m["state"] for m in ring["members"]} == {"up"}
    for key in ("a", "b/c", "d e"):
        assert owner_url(ring, cbucket, key) == cluster.urls[cluster.owner(cbucket, key)]
    s3 = boto3.client("s3", endpoint_url=cluster.nodes[0].endpoint,
                      aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                      region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"}))
    route_to_owners(s3, ring)
    before = cluster.forwarded()
    for i in range(12):
        s3.put_object(Bucket=cbucket, Key=f"routed/{i} x", Body=b"direct")
        assert s3.get_object(Bucket=cbucket, Key=f"routed/{i} x")["Body"].read() == b"direct"
    assert cluster.forwarded() == before  # every request went straight to the owner
    single = httpx.get(f"{cluster.nodes[0].endpoint}/_squall/cluster").json()
    assert [m["url"] for m in single["members"] if m["self"]] == cluster.urls[:1]


def test_clients_cannot_use_peer_traffic(cluster: Cluster, cbucket: str) -> None:
    endpoint = cluster.nodes[0].endpoint
    for path in ("/_squall/peer/dirty?bucket=" + cbucket, "/_squall/peer/object?bucket=x&key=y"):
        response = httpx.get(endpoint + path)
        assert response.status_code == 403 and "signature" in response.headers["x-squall-error"]
        forged = httpx.get(endpoint + path, headers={
            "x-squall-peer": "v2:" + "1" * 16 + ":" + "0" * 16 + ":1800000000:abcd:7:"
                             + "0" * 64})
        assert forged.status_code == 403
    key = cluster.key_owned_by(1, cbucket, "spoof")
    cluster.clients[1].put_object(Bucket=cbucket, Key=key, Body=b"owned by member 1")

    def add_marker(request, **_):  # type: ignore[no-untyped-def]
        request.headers["x-squall-peer"] = "v2:" + "1" * 16 + ":" + "0" * 16 + \
            ":1800000000:abcd:7:" + "0" * 64

    s3 = cluster.clients[0]
    s3.meta.events.register("before-send.s3", add_marker)
    try:
        with pytest.raises(ClientError, match="AccessDenied"):
            s3.get_object(Bucket=cbucket, Key=key)
    finally:
        s3.meta.events.unregister("before-send.s3", add_marker)
    assert s3.get_object(Bucket=cbucket, Key=key)["Body"].read() == b"owned by member 1"


def test_requests_through_a_non_owner_arrive_intact(cluster: Cluster, cbucket: str) -> None:
    """Odd keys (signed over their exact path), ranges, presigned URLs, large bodies."""
    keys = ["a b/../c+d%20\u00e9", "./dot", "x/./y//z", "tab\tkey", "q?x=1&y", "\u65e5\u672c"]
    for key in keys:
        owner = cluster.owner(cbucket, key)
        via = cluster.clients[(owner + 1) % 3]
        via.put_object(Bucket=cbucket, Key=key, Body=key.encode(), ContentType="text/x")
        head = cluster.clients[(owner + 2) % 3].head_object(Bucket=cbucket, Key=key)
        assert head["ContentType"] == "text/x" and head["ContentLength"] == len(key.encode())
    listed = [o["Key"] for o in cluster.clients[0].list_objects_v2(Bucket=cbucket)["Contents"]]
    assert listed == sorted(keys, key=lambda k: k.encode())
    big = os.urandom(6 * 1024 * 1024 + 5)
    key = cluster.key_owned_by(2, cbucket, "large")
    cluster.clients[0].put_object(Bucket=cbucket, Key=key, Body=big)
    got = cluster.clients[1].get_object(Bucket=cbucket, Key=key, Range="bytes=1000-2999999")
    assert got["Body"].read() == big[1000:3000000]
    assert got["ContentRange"] == f"bytes 1000-2999999/{len(big)}"
    url = cluster.clients[0].generate_presigned_url(
        "get_object", Params={"Bucket": cbucket, "Key": key}, ExpiresIn=60)
    assert httpx.get(url).content == big
    chunked = cluster.key_owned_by(1, cbucket, "chunked")
    put_url = cluster.clients[0].generate_presigned_url(
        "put_object", Params={"Bucket": cbucket, "Key": chunked}, ExpiresIn=60)

    def pieces():  # type: ignore[no-untyped-def]
        yield from (big[i:i + 100_000] for i in range(0, len(big), 100_000))
    assert httpx.put(put_url, content=pieces()).status_code == 200  # chunked framing
    assert cluster.clients[2].get_object(Bucket=cbucket, Key=chunked)["Body"].read() == big
    with pytest.raises(ClientError, match="NoSuchKey"):
        cluster.clients[0].get_object(Bucket=cbucket, Key=key + "-missing")
    default = cluster.clients[1].put_object(Bucket=cbucket, Key=key, Body=b"no type")
    assert default["ETag"]
    assert cluster.clients[0].head_object(Bucket=cbucket, Key=key)["ContentType"] == \
        "binary/octet-stream"


def test_the_owner_checks_the_client_signature(cluster: Cluster, cbucket: str) -> None:
    key = cluster.key_owned_by(2, cbucket, "signed")
    wrong = boto3.client("s3", endpoint_url=cluster.nodes[0].endpoint,
                         aws_access_key_id=ACCESS_KEY, aws_secret_access_key="not-the-secret",
                         region_name="us-east-1", config=Config(
                             s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    for body in (b"small", os.urandom(3 * 1024 * 1024)):
        with pytest.raises(ClientError, match="SignatureDoesNotMatch"):
            wrong.put_object(Bucket=cbucket, Key=key, Body=body)
    with pytest.raises(ClientError, match="403"):
        wrong.head_object(Bucket=cbucket, Key=key)
    cluster.clients[0].put_object(Bucket=cbucket, Key=key, Body=b"fine")
    assert cluster.clients[0].get_object(Bucket=cbucket, Key=key)["Body"].read() == b"fine"
