"""A Squall gateway on ``--backend 's3:...?bucket=...'`` in front of a real MinIO, driven
with boto3: what it writes is listed in full, through Squall and on MinIO itself, also
for a store written by the first shared layout (moved when the gateway starts using it).

MinIO keeps objects as a file tree: an object ``x`` beside keys ``x/...`` hides them from
listings. Skipped where MinIO is not installed (scripts/install-minio.sh).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from loadtests.bench.server import ServerProcess
from tests.backends.s3.conftest import boto3_client
from tests.backends.s3.test_shared_layout import path_prefixes
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, run_sync

KEYS = ["rank0/step0", "rank0/step1", "rank0/step2"]


def front(minio: ServerProcess, shared: str, work: Path, cache: bool) -> SquallProcess:
    """A gateway whose buckets all live in MinIO's bucket ``shared``."""
    args = ["--backend", f"s3:{minio.endpoint}?bucket={shared}"]
    if not cache:
        args += ["--cache-size", "0"]  # every write reaches MinIO before it is acknowledged
    return SquallProcess(work / "data", args,
                         env={"SQUALL_UPSTREAM_ACCESS_KEY": ACCESS_KEY,
                              "SQUALL_UPSTREAM_SECRET_KEY": SECRET_KEY})


def minio_keys(minio_s3: Any, bucket: str) -> list[str]:
    paginator = minio_s3.get_paginator("list_objects_v2")
    return [entry["Key"] for page in paginator.paginate(Bucket=bucket)
            for entry in page.get("Contents", [])]


def listed(s3: Any, bucket: str) -> list[str]:
    return [entry["Key"] for entry in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


@pytest.fixture
def shared(minio_s3: Any) -> Iterator[str]:
    name = f"squall-store-{uuid.uuid4().hex[:8]}"
    minio_s3.create_bucket(Bucket=name)
    yield name


@pytest.mark.parametrize("cache", [False, True], ids=["no-cache", "cache"])
def test_every_object_written_is_listed(minio: ServerProcess, minio_s3: Any, shared: str,
                                        tmp_path: Path, cache: bool) -> None:
    gateway = front(minio, shared, tmp_path, cache).start()
    try:
        s3 = boto3_client(gateway.endpoint)
        s3.create_bucket(Bucket="ckpt")
        for key in KEYS:
            s3.put_object(Bucket="ckpt", Key=key, Body=key.encode())
        assert listed(s3, "ckpt") == KEYS
        if cache:
            assert run_sync(gateway).returncode == 0
        for key in KEYS:  # on MinIO itself, listed as well as read by key
            assert minio_s3.get_object(Bucket=shared, Key=f"ckpt/{key}")["Body"].read() \
                == key.encode()
        stored = [k for k in minio_keys(minio_s3, shared) if "/.squall-internal/" not in k]
        assert stored == [".squall/buckets/ckpt", *(f"ckpt/{k}" for k in KEYS)]
        assert path_prefixes(minio_keys(minio_s3, shared)) == []
        assert listed(s3, "ckpt") == KEYS
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["ckpt"]
    finally:
        gateway.stop()


def test_a_store_of_the_first_layout_is_moved_and_listed_in_full(
        minio: ServerProcess, minio_s3: Any, shared: str, tmp_path: Path) -> None:
    minio_s3.put_object(Bucket=shared, Key="ckpt", Body=b"")  # the first layout's marker
    for key in KEYS:
        minio_s3.put_object(Bucket=shared, Key=f"ckpt/{key}", Body=key.encode())
    gateway = front(minio, shared, tmp_path, cache=False).start()
    try:
        s3 = boto3_client(gateway.endpoint)
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["ckpt"]
        assert listed(s3, "ckpt") == KEYS
        keys = minio_keys(minio_s3, shared)
        assert "ckpt" not in keys and ".squall/buckets/ckpt" in keys
        assert path_prefixes(keys) == []
        s3.put_object(Bucket="ckpt", Key="rank0/step3", Body=b"after")
        assert listed(s3, "ckpt") == [*KEYS, "rank0/step3"]
    finally:
        gateway.stop()


def test_keys_minio_cannot_store_are_refused(minio: ServerProcess, minio_s3: Any,
                                             shared: str, tmp_path: Path) -> None:
    """Without a cache tier: a key with an empty or a ``..`` segment is a 400 (MinIO
    refuses it), and listing under a prefix no MinIO key can start with is empty."""
    gateway = front(minio, shared, tmp_path, cache=False).start()
    try:
        s3 = boto3_client(gateway.endpoint)
        s3.create_bucket(Bucket="keys")
        for key in ("a//b", "x/../y"):
            with pytest.raises(ClientError) as caught:
                s3.put_object(Bucket="keys", Key=key, Body=b"x")
            assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        s3.put_object(Bucket="keys", Key="a/b", Body=b"x")
        assert s3.list_objects_v2(Bucket="keys", Prefix="a//").get("KeyCount") == 0
        assert listed(s3, "keys") == ["a/b"]
    finally:
        gateway.stop()
