"""Metadata through a real mount: ``ls -l`` costs one listing, and mtimes are kept so
that ``rsync -a`` is incremental."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.gateway.fuse_mount.conftest import MountProcess
from tests.gateway.fuse_mount.test_programs import ok
from tests.support.server import SquallProcess

BASE_NS = 1_600_000_000_123_456_789  # sub-microsecond digits: kept exactly


def requests_at(squall: SquallProcess) -> Counter[str]:
    """S3 requests the gateway handled so far, by operation (its metrics)."""
    counts: Counter[str] = Counter()
    for line in httpx.get(f"{squall.endpoint}/_squall/metrics").text.splitlines():
        if line.startswith("squall_requests_total{"):
            op = re.search(r'operation="([^"]*)"', line)
            counts[op.group(1) if op else "?"] += int(float(line.rsplit(" ", 1)[1]))
    return counts


def test_ls_l_of_200_files_is_one_listing(squall: SquallProcess, s3, mount_bucket: str,
                                          tmp_path: Path) -> None:
    prefix = f"ls-{uuid.uuid4().hex[:8]}/"
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: s3.put_object(Bucket=mount_bucket, Key=f"{prefix}f{i:03d}",
                                              Body=b"x" * i), range(200)))
    # A wide attribute timeout: the 200 lstat calls must fall within it on a busy machine.
    mount = MountProcess(squall.endpoint, mount_bucket, tmp_path / "mnt",
                         ["--attr-timeout", "30"]).start()
    try:
        directory = mount.path / prefix.rstrip("/")
        assert directory.is_dir()
        before = requests_at(squall)
        listing = ok("ls", "-l", directory)
        spent = requests_at(squall) - before
        entry = re.compile(r" (\d+) \w+ +\d+ +[\d:]+ (f\d{3})$", re.MULTILINE)
        sizes = {m.group(2): int(m.group(1)) for m in entry.finditer(listing)}
        assert sizes == {f"f{i:03d}": i for i in range(200)}, listing[:2000]
        assert spent["HeadObject"] == 0 and sum(spent.values()) <= 3, spent
        # lstat of each entry after the listing: answered from it as well
        assert all(os.lstat(directory / f"f{i:03d}").st_size == i for i in range(200))
        assert sum((requests_at(squall) - before).values()) <= 3
    finally:
        mount.kill()


@pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed")
def test_rsync_a_twice_transfers_nothing_the_second_time(mounted: MountProcess, s3,
                                                         tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(50):
        f = src / f"file-{i:02d}.bin"
        f.write_bytes(os.urandom(100 + i))
        f.chmod(0o640 if i % 2 else 0o600)
        os.utime(f, ns=(BASE_NS, BASE_NS + i * 1_000_000_007))
    target = mounted.path / f"rsync-{uuid.uuid4().hex[:8]}"
    first = ok("rsync", "-a", "--stats", f"{src}/", f"{target}/")
    assert "Number of regular files transferred: 50" in first, first
    second = ok("rsync", "-a", "--stats", f"{src}/", f"{target}/")
    assert "Number of regular files transferred: 0" in second, second
    for i in range(50):
        want, got = os.stat(src / f"file-{i:02d}.bin"), os.stat(target / f"file-{i:02d}.bin")
        assert (got.st_mtime_ns, got.st_mode, got.st_size) == (
            want.st_mtime_ns, want.st_mode, want.st_size), i
    head = s3.head_object(Bucket=mounted.bucket, Key=f"{target.name}/file-07.bin")
    assert head["Metadata"]["mtime"] == "1600000007.123456838"  # s3fs's x-amz-meta-mtime


def test_mtime_of_a_written_file_is_recorded_at_close(mounted: MountProcess, s3) -> None:
    path = mounted.path / f"closed-{uuid.uuid4().hex[:8]}.txt"
    path.write_bytes(b"written here\n")
    seen = path.stat().st_mtime_ns
    stored = s3.head_object(Bucket=mounted.bucket, Key=path.name)["Metadata"]["mtime"]
    seconds, nanos = stored.split(".")
    assert int(seconds) * 1_000_000_000 + int(nanos) == seen


def test_touch_of_a_closed_file_sets_its_mtime_and_touch_a_does_not(
        mounted: MountProcess, s3) -> None:
    path = mounted.path / f"touched-{uuid.uuid4().hex[:8]}.txt"
    path.write_bytes(b"data\n")
    os.utime(path, ns=(BASE_NS, BASE_NS))
    assert path.stat().st_mtime_ns == BASE_NS
    ok("touch", "-a", path)  # atime only: UTIME_OMIT for the mtime
    assert path.stat().st_mtime_ns == BASE_NS
    assert path.read_bytes() == b"data\n"
    head = s3.head_object(Bucket=mounted.bucket, Key=path.name)
    assert head["Metadata"]["mtime"] == "1600000000.123456789" and head["ContentLength"] == 5
