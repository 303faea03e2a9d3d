"""The light PutObject and HeadObject path of the mount's store: what it stores and reads is
what boto3 stores and reads, and every failure is decided as before (same typed errors,
same errno)."""

from __future__ import annotations

import errno
import socket
import uuid

import pytest

from backends import errors as se
from gateway.fuse_mount.errors import errno_for
from gateway.fuse_mount.light import MISSING, LightRequests
from gateway.fuse_mount.store import BucketClient, GatewayCredentials, _crc32c
from gateway.s3api import errors as pe
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

KEYS = ["plain.txt", "dir/with space+plus%percent.bin", "unicodé/ключ ~tilde", "a=b&c?d#e"]


def light(endpoint: str, bucket: str, secret: str = SECRET_KEY) -> LightRequests:
    return LightRequests(endpoint, bucket, ACCESS_KEY, secret, region="us-east-1", pool_size=4,
                    connect_timeout=2, read_timeout=10)


@pytest.mark.parametrize("key", KEYS)
def test_light_put_stores_body_metadata_and_etag_like_boto3(
        squall: SquallProcess, s3, bucket: str, key: str) -> None:
    body = bytearray(uuid.uuid4().bytes * 100)
    etag = light(squall.endpoint, bucket).put(key, body, {"mode": "33188", "mtime": "17"},
                                              _crc32c(body))
    assert etag is not None
    got = s3.get_object(Bucket=bucket, Key=key)
    assert got["Body"].read() == body
    assert got["ETag"] == etag
    assert got["Metadata"] == {"mode": "33188", "mtime": "17"}
    boto3_store = BucketClient(squall.endpoint, bucket,
                               GatewayCredentials(ACCESS_KEY, SECRET_KEY), light_requests=False)
    light_store = BucketClient(squall.endpoint, bucket,
                               GatewayCredentials(ACCESS_KEY, SECRET_KEY))
    assert light_store.head(key) == boto3_store.head(key)


def test_light_put_of_an_empty_body(squall: SquallProcess, s3, bucket: str) -> None:
    assert light(squall.endpoint, bucket).put("empty/", b"", {}, _crc32c(b"")) is not None
    assert s3.head_object(Bucket=bucket, Key="empty/")["ContentLength"] == 0


def test_light_put_declines_what_it_does_not_send(squall: SquallProcess, s3,
                                                   bucket: str) -> None:
    """Errors and non-ASCII metadata: None (the caller goes through boto3); a bad
    checksum is refused by the gateway and nothing is stored."""
    put = light(squall.endpoint, bucket)
    assert put.put("k", b"data", {"name": "é"}, _crc32c(b"data")) is None
    assert put.put("k", b"data", {}, _crc32c(b"other")) is None
    assert light(squall.endpoint, bucket, secret="wrong").put(
        "k", b"data", {}, _crc32c(b"data")) is None
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
    assert put.head("k") == MISSING
    assert light(squall.endpoint, bucket, secret="wrong").head("k") is None


def test_store_head_of_a_missing_key_is_no_such_key(squall: SquallProcess,
                                                    bucket: str) -> None:
    store = BucketClient(squall.endpoint, bucket, GatewayCredentials(ACCESS_KEY, SECRET_KEY))
    with pytest.raises(se.NoSuchKey) as caught:
        store.head("absent/name")
    assert errno_for(caught.value) == errno.ENOENT


def test_store_put_errors_are_those_of_boto3(squall: SquallProcess, bucket: str) -> None:
    missing = BucketClient(squall.endpoint, f"missing-{uuid.uuid4().hex[:8]}",
                           GatewayCredentials(ACCESS_KEY, SECRET_KEY), max_attempts=1)
    with pytest.raises(se.NoSuchBucket) as caught:
        missing.put("k", b"data", {})
    assert errno_for(caught.value) == errno.ENOENT
    wrong = BucketClient(squall.endpoint, bucket, GatewayCredentials(ACCESS_KEY, "wrong"),
                         max_attempts=1)
    with pytest.raises(pe.SignatureDoesNotMatch) as denied:
        wrong.put("k", b"data", {})
    assert errno_for(denied.value) == errno.EACCES
    with pytest.raises(pe.AccessDenied) as head_denied:  # a HEAD has no body: its status
        wrong.head("k")
    assert errno_for(head_denied.value) == errno.EACCES


def test_store_put_goes_through_boto3_when_the_light_path_fails(
        squall: SquallProcess, s3, bucket: str) -> None:
    """Fault injected (a dropped connection cannot be produced on demand against the real
    gateway): the light path points at a closed port, boto3 then stores the file."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    store = BucketClient(squall.endpoint, bucket, GatewayCredentials(ACCESS_KEY, SECRET_KEY))
    store._light = light(dead, bucket)  # the fault injected
    etag = store.put("retried.txt", b"payload", {"mode": "33188"})
    got = s3.get_object(Bucket=bucket, Key="retried.txt")
    assert (got["Body"].read(), got["ETag"], got["Metadata"]) == (
        b"payload", etag, {"mode": "33188"})
    assert store.head("retried.txt").etag == etag
    with pytest.raises(se.NoSuchKey):
        store.head("absent")


def test_store_without_light_requests(squall: SquallProcess, s3, bucket: str) -> None:
    store = BucketClient(squall.endpoint, bucket, GatewayCredentials(ACCESS_KEY, SECRET_KEY),
                         light_requests=False)
    assert store.put("boto3.txt", b"x", {}) == s3.head_object(
        Bucket=bucket, Key="boto3.txt")["ETag"]
