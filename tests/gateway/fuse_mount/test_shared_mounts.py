"""N-1 through several mounts of one bucket (``--shared-files``): each mount writes its own
ranges of one file; the last writer to close completes one object holding all of them."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.fuse_mount.shared_upload import sidecar_key
from tests.gateway.fuse_mount.conftest import MountProcess
from tests.gateway.fuse_mount.mpi_n1_checkpoint import expected_bytes, layout, range_bytes
from tests.gateway.fuse_mount.test_workloads import mpirun_argv, run
from tests.support.server import SquallProcess

MiB = 1024 * 1024
SHARED = ["--shared-files", "shared/*", "--block-size", "5MiB"]


@pytest.fixture
def two_mounts(squall: SquallProcess, mount_bucket: str,
               tmp_path: Path) -> Iterator[tuple[MountProcess, MountProcess]]:
    first = MountProcess(squall.endpoint, mount_bucket, tmp_path / "a", SHARED).start()
    try:
        second = MountProcess(squall.endpoint, mount_bucket, tmp_path / "b", SHARED).start()
        try:
            yield first, second
        finally:
            assert second.stop() == 0, second.log()
    finally:
        assert first.stop() == 0, first.log()


def test_two_mounts_write_disjoint_ranges_of_one_file(
        two_mounts: tuple[MountProcess, MountProcess], s3) -> None:
    a, b = two_mounts
    name = f"shared/ckpt-{uuid.uuid4().hex[:8]}.bin"
    (a.path / "shared").mkdir(exist_ok=True)
    ranges = layout(4, 2, 2 * MiB + 12_345)  # parts of 5 MiB: whole ones and boundaries
    fds = [os.open(m.path / name, os.O_WRONLY | os.O_CREAT, 0o644) for m in (a, b)]
    try:
        for rank, offset, length in ranges:
            os.pwrite(fds[rank % 2], range_bytes(rank, offset, length), offset)
        os.fsync(fds[0])
        assert "Contents" not in s3.list_objects_v2(Bucket=a.bucket, Prefix=name)
    finally:
        os.close(fds[0])  # the first writer leaves: nothing published yet
        assert "Contents" not in s3.list_objects_v2(Bucket=a.bucket, Prefix=name)
        os.close(fds[1])  # the last one completes
    body = s3.get_object(Bucket=a.bucket, Key=name)["Body"].read()
    assert body == b"".join(range_bytes(r, o, n) for r, o, n in ranges)
    assert s3.list_multipart_uploads(Bucket=a.bucket, Prefix=name).get("Uploads", []) == []
    leftovers = s3.list_objects_v2(Bucket=a.bucket, Prefix=".squall-shared/")
    assert not [o["Key"] for o in leftovers.get("Contents", []) if name in o["Key"]]


def test_a_part_written_whole_goes_up_before_the_close_and_a_rewrite_of_it_wins(
        two_mounts: tuple[MountProcess, MountProcess], s3) -> None:
    a, _ = two_mounts
    name = f"shared/whole-{uuid.uuid4().hex[:8]}.bin"
    (a.path / "shared").mkdir(exist_ok=True)
    data = bytearray(os.urandom(6 * MiB))
    fd = os.open(a.path / name, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)  # part 1 (5 MiB) whole, part 2 begun
        sidecar = json.loads(s3.get_object(Bucket=a.bucket,
                                           Key=sidecar_key(name))["Body"].read())
        deadline = time.monotonic() + 30
        while not (parts := s3.list_parts(Bucket=a.bucket, Key=name,
                                          UploadId=sidecar["upload_id"]).get("Parts")):
            assert time.monotonic() < deadline, "part 1 was not uploaded before fsync"
            time.sleep(0.05)
        assert [p["PartNumber"] for p in parts] == [1]
        data[MiB:MiB + 4] = b"late"  # a write into the part already sent
        os.pwrite(fd, b"late", MiB)
    finally:
        os.close(fd)
    assert s3.get_object(Bucket=a.bucket, Key=name)["Body"].read() == data


@pytest.mark.timeout(240)
def test_mpi_ranks_on_two_mounts_write_one_shared_file(
        two_mounts: tuple[MountProcess, MountProcess], s3) -> None:
    a, b = two_mounts
    argv = mpirun_argv(4)
    if "--oversubscribe" in argv:  # Open MPI: every rank aggregates (writes) its own ranges
        argv += ["--mca", "io_ompio_num_aggregators", "4"]
    name = f"shared/mpi-{uuid.uuid4().hex[:8]}.bin"
    (a.path / "shared").mkdir(exist_ok=True)
    script = Path(__file__).with_name("mpi_n1_checkpoint.py")
    result = run([*argv, sys.executable, str(script), str(a.path / name), "--second-path",
                  str(b.path / name), "--records", "3", "--size", "300001"], timeout=120)
    assert result.returncode == 0, (result.stdout, result.stderr, a.log(), b.log())
    body = s3.get_object(Bucket=a.bucket, Key=name)["Body"].read()
    assert body == expected_bytes(4, 3, 300_001)


@pytest.mark.timeout(120)
def test_a_file_left_by_a_killed_mount_is_written_again_by_the_next_run(
        squall: SquallProcess, mount_bucket: str, tmp_path: Path, s3) -> None:
    """A checkpoint job dies (its mount with it: SIGKILL) while writing a shared file;
    once the dead mount's lease ran out, the next run's mount writes the same file and it
    is completed: the abandoned upload does not keep it open for ever."""
    options = [*SHARED, "--shared-lease", "3s"]
    name = f"shared/restart-{uuid.uuid4().hex[:8]}.bin"
    crashed = MountProcess(squall.endpoint, mount_bucket, tmp_path / "a", options).start()
    try:
        (crashed.path / "shared").mkdir(exist_ok=True)
        fd = os.open(crashed.path / name, os.O_WRONLY | os.O_CREAT, 0o644)
        os.pwrite(fd, b"first run" * 100_000, 0)
        os.fsync(fd)  # its parts are at the gateway; the sidecar names it open
    finally:
        crashed.kill()
    with contextlib.suppress(OSError):  # the mount is gone (ENOTCONN)
        os.close(fd)
    time.sleep(3.5)  # the job is started again after the dead mount's lease ran out
    restarted = MountProcess(squall.endpoint, mount_bucket, tmp_path / "b", options).start()
    try:
        data = b"second run" * 200_000
        (restarted.path / name).write_bytes(data)  # waits for the lease, then takes over
    finally:
        assert restarted.stop() == 0, restarted.log()
    assert s3.get_object(Bucket=mount_bucket, Key=name)["Body"].read() == data
    assert s3.list_multipart_uploads(Bucket=mount_bucket, Prefix=name).get("Uploads", []) == []
    assert "took over a shared upload" in restarted.log()


def faketime_library() -> Path | None:
    """Debian's libfaketime (package faketime), which shifts a process's wall clock."""
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    return found[0] if found else None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shift", ["+300s", "-300s"])
def test_a_mount_whose_clock_is_minutes_off_keeps_to_the_leases(
        squall: SquallProcess, mount_bucket: str, tmp_path: Path, s3, shift: str) -> None:
    """Leases are told in the gateway's time. One of two mounts runs with its clock five
    minutes ahead or behind (a real process under libfaketime); the mount that judges the
    other's lease when it closes first (the one ahead; the one in step when the other is
    behind) does not take it for run out, as it would on the mounts' own clocks (its close
    would abort the upload with EIO); the last close completes the file."""
    library = faketime_library()
    if library is None:
        pytest.skip("libfaketime is not installed (Debian package faketime)")
    options = [*SHARED, "--shared-lease", "60s"]
    off = MountProcess(squall.endpoint, mount_bucket, tmp_path / "off", options,
                       env={"LD_PRELOAD": str(library), "FAKETIME": shift,
                            "DONT_FAKE_MONOTONIC": "1"}).start()
    try:
        in_step = MountProcess(squall.endpoint, mount_bucket, tmp_path / "in-step",
                               options).start()
        try:
            name = f"shared/skew-{uuid.uuid4().hex[:8]}.bin"
            (off.path / "shared").mkdir(exist_ok=True)
            ranges = layout(4, 1, MiB + 4_099)
            mounts = [in_step, off] if shift.startswith("+") else [off, in_step]
            fds = [os.open(m.path / name, os.O_WRONLY | os.O_CREAT, 0o644) for m in mounts]
            try:
                for rank, offset, length in ranges:
                    os.pwrite(fds[rank % 2], range_bytes(rank, offset, length), offset)
            finally:
                os.close(fds[1])  # leaves first, while the other writer is live
                os.close(fds[0])  # the last close completes
        finally:
            assert in_step.stop() == 0, in_step.log()
    finally:
        assert off.stop() == 0, off.log()
    body = s3.get_object(Bucket=mount_bucket, Key=name)["Body"].read()
    assert body == b"".join(range_bytes(r, o, n) for r, o, n in ranges)
    assert "stopped renewing" not in off.log() + in_step.log()
