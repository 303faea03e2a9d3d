"""Leases of shared-file writers (``--shared-files``), through the sidecar protocol on the
session's gateway (no FUSE; the mounts' own test is in test_shared_mounts.py): a writer
that stops renewing (its mount died) is counted as gone once its lease expires."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path

import pytest

from gateway.client.credentials import Credentials
from gateway.fuse_mount.errors import UploadFailed
from gateway.fuse_mount.shared_upload import (
    LeaseRenewer,
    Ranges,
    SharedUpload,
    fragment_prefix,
    sidecar_key,
)
from gateway.fuse_mount.store import BucketClient
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

MiB = 1024 * 1024
PART = 5 * MiB
LEASE = 0.6
#: for writers that must outlast a join on a loaded machine (a second or more) unrenewed
SLOW_LEASE = 3.0


class Writer:
    """One mount's share of the file: its bytes in a staging file, like SharedFile."""

    def __init__(self, store: BucketClient, key: str, name: str, tmp_path: Path, *,
                 lease: float = LEASE) -> None:
        self.upload = SharedUpload(store, key, writer=name, part_size=PART, lease=lease)
        self.ranges = Ranges()
        self.file = open(tmp_path / f"{name}.staging", "w+b")  # noqa: SIM115

    def write(self, offset: int, data: bytes) -> None:
        self.file.seek(offset)
        self.file.write(data)
        self.file.flush()
        self.ranges.add(offset, offset + len(data))
        end = offset + len(data)
        self.upload.send(self.file.fileno(), self.ranges,
                         set(range(offset // PART, (end - 1) // PART + 1)))


@pytest.fixture
def store(squall: SquallProcess, bucket: str) -> BucketClient:
    return BucketClient(squall.endpoint, bucket, Credentials(ACCESS_KEY, SECRET_KEY))


def uploads(s3, bucket: str, key: str) -> list[str]:  # type: ignore[no-untyped-def]
    listed = s3.list_multipart_uploads(Bucket=bucket, Prefix=key).get("Uploads", [])
    return [u["UploadId"] for u in listed if u["Key"] == key]


def keys_under(s3, bucket: str, prefix: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
            .get("Contents", [])]


def test_an_upload_left_by_a_dead_writer_is_taken_over(store: BucketClient, s3, bucket: str,
                                                       tmp_path: Path) -> None:
    key = f"ckpt-{uuid.uuid4().hex[:8]}.bin"
    dead = Writer(store, key, "dead", tmp_path)
    dead.upload.join()
    dead.write(100, b"old run" * 1000)  # a fragment; then the mount dies: no renewal
    old = dead.upload.upload_id
    time.sleep(LEASE + 0.1)
    new = Writer(store, key, "new", tmp_path)
    new.upload.join()
    assert new.upload.upload_id != old
    assert uploads(s3, bucket, key) == [new.upload.upload_id]  # the old one aborted
    assert keys_under(s3, bucket, fragment_prefix(key, old)) == []
    data = b"new run" * 3000
    new.write(0, data)
    assert new.upload.leave(len(data)) is True
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    dead.upload.renew()  # the dead writer comes back: it lost its share
    assert dead.upload.lost
    with pytest.raises(UploadFailed):
        dead.upload.leave(7000)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data


def test_a_renewed_writer_keeps_its_share(store: BucketClient, s3, bucket: str,
                                          tmp_path: Path) -> None:
    key = f"ckpt-{uuid.uuid4().hex[:8]}.bin"
    first, second = Writer(store, key, "a", tmp_path), Writer(store, key, "b", tmp_path)
    renewer = LeaseRenewer()
    first.upload.join()
    renewer.add(first.upload)
    first.write(0, b"A" * 1000)
    time.sleep(4 * LEASE)  # idle, but renewed
    second.upload.join()
    assert second.upload.upload_id == first.upload.upload_id
    second.write(1000, b"B" * 1000)
    assert second.upload.leave(2000) is False  # the first is still writing
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix=key)
    assert first.upload.leave(1000) is True
    renewer.remove(first.upload)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"A" * 1000 + b"B" * 1000


def test_the_last_live_writer_aborts_when_another_never_closed(
        store: BucketClient, s3, bucket: str, tmp_path: Path) -> None:
    key = f"ckpt-{uuid.uuid4().hex[:8]}.bin"
    s3.put_object(Bucket=bucket, Key=key, Body=b"previous version")
    # (a lease that outlasts a slow join: nothing renews the dead writer's)
    dead = Writer(store, key, "dead", tmp_path, lease=SLOW_LEASE)
    live = Writer(store, key, "live", tmp_path, lease=SLOW_LEASE)
    dead.upload.join()
    live.upload.join()
    assert live.upload.upload_id == dead.upload.upload_id  # joined, not taken over
    dead.write(0, b"D" * 100)
    live.write(100, b"L" * 100)
    time.sleep(SLOW_LEASE + 0.1)  # the dead writer's lease runs out before the live one closes
    with pytest.raises(UploadFailed):
        live.upload.leave(200)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"previous version"
    assert uploads(s3, bucket, key) == []
    assert keys_under(s3, bucket, sidecar_key(key)) == []


def test_a_joiner_waits_while_the_last_writer_completes(store: BucketClient, s3, bucket: str,
                                                        tmp_path: Path) -> None:
    """No writer open but the sidecar changed within a lease: its last writer is
    completing the upload. A new writer waits for that instead of taking it over."""
    key = f"ckpt-{uuid.uuid4().hex[:8]}.bin"
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    state = {"upload_id": upload, "part_size": PART, "updated": time.time(),
             "writers": {"closer": {"open": False, "end": 10, "expires": time.time() + 30}}}
    s3.put_object(Bucket=bucket, Key=sidecar_key(key), Body=json.dumps(state).encode())
    done = threading.Timer(0.5, s3.delete_object,
                           kwargs={"Bucket": bucket, "Key": sidecar_key(key)})
    done.start()  # the completion ends: the sidecar goes
    joiner = Writer(store, key, "next", tmp_path, lease=30.0)
    started = time.monotonic()
    joiner.upload.join()
    assert time.monotonic() - started >= 0.4
    assert joiner.upload.upload_id != upload
    assert upload in uploads(s3, bucket, key)  # not aborted by the joiner
    s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
    assert joiner.upload.leave(0) is True


def test_a_writer_that_left_aborts_once_the_others_died(store: BucketClient, s3, bucket: str,
                                                        tmp_path: Path) -> None:
    """A mount closed its share while another mount still wrote; that one died. The first
    mount, still up, watches the upload and aborts it once the dead writer's lease ran
    out, so that nothing is left for a lifecycle rule and the next run need not wait."""
    key = f"ckpt-{uuid.uuid4().hex[:8]}.bin"
    # (a lease that outlasts a slow join and the writes: nothing renews the dead writer's)
    dead = Writer(store, key, "dead", tmp_path, lease=SLOW_LEASE)
    left = Writer(store, key, "left", tmp_path, lease=SLOW_LEASE)
    renewer = LeaseRenewer()
    dead.upload.join()
    left.upload.join()
    dead.write(0, b"D" * 100)
    left.write(100, b"L" * 100)
    assert left.upload.leave(200) is False  # the other writer is alive (for now)
    renewer.watch(left.upload)
    deadline = time.monotonic() + 2 * SLOW_LEASE + 5
    while keys_under(s3, bucket, sidecar_key(key)):
        assert time.monotonic() < deadline, "the abandoned upload was never aborted"
        time.sleep(0.1)
    assert uploads(s3, bucket, key) == []
    assert keys_under(s3, bucket, fragment_prefix(key, left.upload.upload_id)) == []
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket=bucket, Key=key)
