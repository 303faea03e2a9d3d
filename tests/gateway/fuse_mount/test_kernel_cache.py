"""The kernel's caches on a default mount (writeback cache on): small writes are gathered,
yet a file another client rewrites is seen with its new size and bytes at the next open,
fsync is durable at the gateway, and an unchanged file is read again from the page cache."""

from __future__ import annotations

import os
import time
import uuid

from tests.gateway.fuse_mount.conftest import MountProcess
from tests.gateway.fuse_mount.test_metadata import requests_at
from tests.support.server import SquallProcess

KiB, MiB = 1024, 1024 * 1024


def read_through_open(path: os.PathLike[str] | str) -> tuple[int, bytes]:
    """(fstat size, content) of one open of ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        chunks = []
        while chunk := os.read(fd, 1 * MiB):
            chunks.append(chunk)
        return size, b"".join(chunks)
    finally:
        os.close(fd)


def test_writeback_cache_is_on_by_default(mounted: MountProcess) -> None:
    assert "--writeback-cache" not in mounted.args and "--no-writeback-cache" not in mounted.args
    deadline = time.monotonic() + 30  # logged by FUSE's init, which may follow the mount
    while "kernel writeback cache: on" not in mounted.log():
        assert time.monotonic() < deadline, mounted.log()
        time.sleep(0.1)


def test_file_rewritten_by_another_client_is_seen_at_the_next_open(
        mounted: MountProcess, s3) -> None:
    name = f"rewritten-{uuid.uuid4().hex[:8]}.bin"
    path = mounted.path / name
    path.write_bytes(b"a" * 1000)  # the kernel caches its inode, size and pages
    assert read_through_open(path) == (1000, b"a" * 1000)
    for body in (b"b" * 5000 + b"end", b"c" * 10, os.urandom(3 * MiB + 7)):
        s3.put_object(Bucket=mounted.bucket, Key=name, Body=body)  # at once: within the
        assert read_through_open(path) == (len(body), body)  # kernel's entry timeout
    time.sleep(1.2)  # past --attr-timeout: a plain stat sees it too
    s3.put_object(Bucket=mounted.bucket, Key=name, Body=b"d" * 77)
    time.sleep(1.2)
    assert path.stat().st_size == 77
    assert path.read_bytes() == b"d" * 77


def test_same_size_rewrite_gives_the_new_bytes(mounted: MountProcess, s3) -> None:
    name = f"same-size-{uuid.uuid4().hex[:8]}.bin"
    path = mounted.path / name
    s3.put_object(Bucket=mounted.bucket, Key=name, Body=b"1" * 4096)
    assert path.read_bytes() == b"1" * 4096
    s3.put_object(Bucket=mounted.bucket, Key=name, Body=b"2" * 4096)
    assert read_through_open(path) == (4096, b"2" * 4096)


def test_unchanged_file_is_read_again_from_the_page_cache(
        squall: SquallProcess, mounted: MountProcess, s3) -> None:
    name = f"twice-{uuid.uuid4().hex[:8]}.bin"
    body = os.urandom(2 * MiB + 123)
    s3.put_object(Bucket=mounted.bucket, Key=name, Body=body)
    path = mounted.path / name
    assert read_through_open(path) == (len(body), body)
    before = requests_at(squall)
    assert read_through_open(path) == (len(body), body)
    spent = requests_at(squall) - before
    assert spent["GetObject"] == 0, spent  # the open's HeadObject found the same ETag


def test_small_writes_fsync_is_durable_at_the_gateway(mounted: MountProcess, s3) -> None:
    name = f"small-writes-{uuid.uuid4().hex[:8]}.bin"
    payload = os.urandom(2 * MiB + 5)
    fd = os.open(mounted.path / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for start in range(0, len(payload), 4 * KiB):
            os.write(fd, payload[start:start + 4 * KiB])
        os.fsync(fd)
        stored = s3.get_object(Bucket=mounted.bucket, Key=name)["Body"].read()
        assert stored == payload  # before close: fsync stored everything the kernel held
        os.write(fd, b"tail")
    finally:
        os.close(fd)
    stored = s3.get_object(Bucket=mounted.bucket, Key=name)["Body"].read()
    assert stored == payload + b"tail"
    assert (mounted.path / name).stat().st_size == len(payload) + 4


def test_no_writeback_cache_flag_still_works(squall: SquallProcess, mount_bucket: str,
                                             tmp_path, s3) -> None:  # type: ignore[no-untyped-def]
    mount = MountProcess(squall.endpoint, mount_bucket, tmp_path / "mnt",
                         ["--no-writeback-cache"]).start()
    try:
        name = f"plain-{uuid.uuid4().hex[:8]}.txt"
        (mount.path / name).write_bytes(b"hello")
        s3.put_object(Bucket=mount_bucket, Key=name, Body=b"hello, world")
        assert read_through_open(mount.path / name) == (12, b"hello, world")
        assert "kernel writeback cache: off" in mount.log()
    finally:
        assert mount.stop() == 0, mount.log()
