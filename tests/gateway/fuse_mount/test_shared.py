"""Several handles of one path in one mount behave like a local file: they share one state."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.gateway.fuse_mount.conftest import MountProcess

MiB = 1024 * 1024


def s3_bytes(s3, bucket: str, key: str) -> bytes:  # type: ignore[no-untyped-def]
    return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())


def test_concurrent_writers_of_one_file_see_each_other(mounted: MountProcess, s3) -> None:
    """Threads with their own descriptors write interleaved regions of one existing file,
    read the others' unflushed writes, then close one after the other: the last close
    stores everything."""
    writers, region = 4, 3 * MiB + 17
    path = mounted.path / "shared" / "one.bin"
    path.parent.mkdir()
    path.write_bytes(b"\0" * writers * region)
    payload = [bytes([65 + i]) * region for i in range(writers)]
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            fd = os.open(path, os.O_RDWR)
            try:
                for start in range(0, region, 64 * 1024):  # interleaved small writes
                    chunk = payload[i][start:start + 64 * 1024]
                    assert os.pwrite(fd, chunk, i * region + start) == len(chunk)
                barrier.wait(60)
                for j in range(writers):  # every other writer's bytes, before any close
                    assert os.pread(fd, region, j * region) == payload[j], (i, j)
                barrier.wait(60)
            finally:
                os.close(fd)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert s3_bytes(s3, mounted.bucket, "shared/one.bin") == b"".join(payload)


def test_processes_appending_to_one_file(mounted: MountProcess, s3) -> None:
    """O_APPEND writers in separate processes: every line arrives, none is torn."""
    path = mounted.path / "shared-log.txt"
    script = ("import os, sys\n"
              "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)\n"
              "for n in range(200):\n"
              "    os.write(fd, f'{sys.argv[2]}:{n:04d}\\n'.encode())\n"
              "os.close(fd)\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), name])
             for name in ("a", "b", "c")]
    assert [p.wait(120) for p in procs] == [0, 0, 0]
    lines = s3_bytes(s3, mounted.bucket, "shared-log.txt").decode().splitlines()
    assert sorted(lines) == sorted(f"{name}:{n:04d}" for name in "abc" for n in range(200))
    for name in "abc":  # each writer's lines stay in order
        own = [line for line in lines if line.startswith(name)]
        assert own == sorted(own)


def test_reader_opened_first_sees_a_writers_unflushed_bytes(mounted: MountProcess, s3) -> None:
    s3.put_object(Bucket=mounted.bucket, Key="seen.txt", Body=b"old content")
    path = mounted.path / "seen.txt"
    with open(path, "rb", buffering=0) as reader:
        assert reader.read() == b"old content"
        with open(path, "r+b", buffering=0) as writer:
            writer.write(b"NEW")
            reader.seek(0)
            assert reader.read() == b"NEW content"  # not stored yet, but shared
            assert s3_bytes(s3, mounted.bucket, "seen.txt") == b"old content"
    assert s3_bytes(s3, mounted.bucket, "seen.txt") == b"NEW content"


def test_unlinked_open_file_keeps_working_and_is_not_stored(mounted: MountProcess, s3) -> None:
    data = os.urandom(9 * MiB)  # more than one block: already streaming when unlinked
    path = mounted.path / "scratch.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        other = os.open(path, os.O_RDONLY)
        os.unlink(path)
        assert not path.exists()
        assert "scratch.bin" not in os.listdir(mounted.path)
        os.pwrite(fd, b"tail", len(data))
        os.fsync(fd)
        assert os.pread(other, 4, len(data)) == b"tail"
        assert os.pread(fd, 1024, 5 * MiB) == data[5 * MiB:5 * MiB + 1024]
        os.close(other)
    finally:
        os.close(fd)
    listed = s3.list_objects_v2(Bucket=mounted.bucket, Prefix="scratch").get("Contents", [])
    assert listed == []


def test_rename_of_an_open_file_keeps_its_handles(mounted: MountProcess, s3) -> None:
    old, new = mounted.path / "moving.bin", mounted.path / "moved.bin"
    with open(old, "wb", buffering=0) as f:
        f.write(b"first ")
        os.rename(old, new)
        f.write(b"second")
    assert s3_bytes(s3, mounted.bucket, "moved.bin") == b"first second"
    assert s3.list_objects_v2(Bucket=mounted.bucket, Prefix="moving").get("KeyCount") == 0


def test_chmod_after_close_then_rename(mounted: MountProcess, s3, tmp_path: Path) -> None:
    """What rsync and cp -p do: write a temporary name, close, chmod, rename at once."""
    for i in range(10):
        tmp, final = mounted.path / f".part-{i}", mounted.path / f"done-{i}"
        tmp.write_bytes(b"x" * (i + 1))
        os.chmod(tmp, 0o640)
        os.rename(tmp, final)
        assert oct(final.stat().st_mode & 0o777) == "0o640"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=mounted.bucket).get("Contents", [])]
    assert not [k for k in keys if k.startswith(".part-")]
    assert sorted(k for k in keys if k.startswith("done-")) == [f"done-{i}" for i in range(10)]
    assert s3.head_object(Bucket=mounted.bucket, Key="done-3")["Metadata"]["mode"] == "640"
