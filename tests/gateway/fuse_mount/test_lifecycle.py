"""Mount lifecycle: CLI errors, background mode, clean unmounts, crashes, failing uploads."""

from __future__ import annotations

import errno
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gateway.fuse_mount.conftest import MountProcess, is_mounted, mount_env, unmount
from tests.support.server import SquallProcess, free_port

MiB = 1024 * 1024

# A program that keeps a file open for writing: it writes, reports, then waits for stdin.
WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, b"n" * int(sys.argv[2]))
print("written", flush=True)
sys.stdin.read()
try:
    os.close(fd)
except OSError:
    pass
"""


def start_writer(path: Path, size: int) -> subprocess.Popen[str]:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(size)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    assert writer.stdout.readline() == "written\n"
    return writer


def stop_writer(writer: subprocess.Popen[str]) -> None:
    writer.kill()
    writer.wait()


def mount_cli(*argv: str | Path, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.fuse_mount", *map(str, argv)],
                          check=False, capture_output=True, text=True, timeout=120,
                          env=env or mount_env())


@pytest.mark.parametrize("case", ["missing", "file", "not-empty", "unreachable", "no-bucket",
                                  "bad-credentials", "small-block", "no-ring"])
def test_cli_errors_exit_without_traceback(case: str, squall: SquallProcess,
                                           mount_bucket: str, tmp_path: Path) -> None:
    """Bad input exits 2; a gateway that cannot be reached or refuses, 1."""
    mnt, endpoint, bucket, extra = tmp_path / "mnt", squall.endpoint, mount_bucket, []
    mnt.mkdir()
    env = mount_env()
    expected = {"missing": "does not exist", "file": "is not a directory",
                "not-empty": "is not empty", "unreachable": "cannot reach http://127.0.0.1:",
                "no-bucket": "does not exist", "bad-credentials": "denied",
                "small-block": "--block-size", "no-ring": "cannot read the cluster ring"}[case]
    if case == "missing":
        mnt = tmp_path / "nowhere"
    elif case == "file":
        mnt = tmp_path / "file"
        mnt.write_text("x")
    elif case == "not-empty":
        (mnt / "x").write_text("x")
    elif case in ("unreachable", "no-ring"):
        endpoint = f"http://127.0.0.1:{free_port()}"
        extra = ["--route-to-owners"] if case == "no-ring" else []
    elif case == "no-bucket":
        bucket = "no-such-bucket-here"
    elif case == "bad-credentials":
        env = mount_env(SQUALL_SECRET_KEY="wrong-secret")
    else:
        extra = ["--block-size", "1MiB"]
    result = mount_cli(endpoint, bucket, mnt, *extra, env=env)
    status = 1 if case in ("unreachable", "no-bucket", "bad-credentials", "no-ring") else 2
    assert result.returncode == status, result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.startswith("squall mount: ") and result.stderr.count("\n") == 1
    assert not is_mounted(mnt)


def test_aws_credentials_and_background_mode(squall: SquallProcess, mount_bucket: str,
                                             s3, tmp_path: Path) -> None:
    mnt = tmp_path / "bg"
    mnt.mkdir()
    env = mount_env()
    env["AWS_ACCESS_KEY_ID"] = env.pop("SQUALL_ACCESS_KEY")
    env["AWS_SECRET_ACCESS_KEY"] = env.pop("SQUALL_SECRET_KEY")
    result = mount_cli(squall.endpoint, mount_bucket, mnt, "--background",
                       "--log-file", tmp_path / "bg.log", env=env)
    try:
        assert result.returncode == 0, result.stderr
        assert is_mounted(mnt)  # ready when the command returns
        (mnt / "bg.txt").write_text("from the background")
        assert s3.get_object(Bucket=mount_bucket, Key="bg.txt")["Body"].read() == \
            b"from the background"
        pid = int(re.search(r"pid (\d+)", result.stderr).group(1))  # type: ignore[union-attr]
    finally:
        unmount(mnt)
    _wait_exit(pid)


def _wait_exit(pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"mount process {pid} still running after unmount")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_unmounts_and_completes_open_files(signum: signal.Signals,
                                                  new_mount: MountProcess, s3) -> None:
    key = f"open-at-{signum.name}.bin"
    writer = start_writer(new_mount.path / key, 12 * MiB)
    try:
        new_mount.signal(signum)
        assert new_mount.proc is not None
        assert new_mount.proc.wait(60) == 0, new_mount.log()
        assert not is_mounted(new_mount.path)
        head = s3.head_object(Bucket=new_mount.bucket, Key=key)
        assert head["ContentLength"] == 12 * MiB
    finally:
        stop_writer(writer)


def test_crash_while_writing_keeps_previous_version(new_mount: MountProcess, s3) -> None:
    previous = os.urandom(MiB)
    s3.put_object(Bucket=new_mount.bucket, Key="crash/ckpt.bin", Body=previous)
    writers = [start_writer(new_mount.path / "crash" / "ckpt.bin", 30 * MiB),
               start_writer(new_mount.path / "crash" / "new.bin", 20 * MiB)]
    try:
        new_mount.kill()  # SIGKILL with parts uploaded and the uploads not completed
        assert not is_mounted(new_mount.path)  # the dead mount was cleaned up
    finally:
        for writer in writers:
            stop_writer(writer)
    body = s3.get_object(Bucket=new_mount.bucket, Key="crash/ckpt.bin")["Body"].read()
    assert body == previous
    listed = s3.list_objects_v2(Bucket=new_mount.bucket, Prefix="crash/")["Contents"]
    # nothing half-written became visible: the new file does not exist at all
    assert [(o["Key"], o["Size"]) for o in listed] == [("crash/ckpt.bin", MiB)]
    uploads = s3.list_multipart_uploads(Bucket=new_mount.bucket, Prefix="crash/")
    assert {u["Key"] for u in uploads.get("Uploads", [])} <= {"crash/ckpt.bin", "crash/new.bin"}


def test_failed_upload_is_eio_never_silent(tmp_path: Path) -> None:
    server = SquallProcess(tmp_path / "data", ["--min-part-size", str(5 * MiB)]).start()
    mount = None
    try:
        from tests.conftest import make_client

        make_client(server.endpoint).create_bucket(Bucket="failing")
        mount = MountProcess(server.endpoint, "failing", tmp_path / "mnt",
                             ["--max-attempts", "1"]).start()
        fd = os.open(mount.path / "lost.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.write(fd, b"a" * MiB)
        server.stop()
        errors = []
        try:
            for _ in range(20):
                os.write(fd, b"b" * MiB)
        except OSError as exc:
            errors.append(exc.errno)
        try:
            os.close(fd)
        except OSError as exc:
            errors.append(exc.errno)
        assert errors and set(errors) == {errno.EIO}
    finally:
        if mount is not None:
            mount.kill()
        server.kill()


@pytest.mark.timeout(180)
def test_sustained_slowdown_is_enospc_and_keeps_the_previous_version(tmp_path: Path) -> None:
    """A new version too big for the gateway's cache (2 MiB) goes straight to the backend
    once the earlier version, still in the cache, is flushed; with the backend throttled
    to 16 KiB/s that does not happen before the gateway's backpressure wait runs out, and
    it answers 503 SlowDown: close() returns ENOSPC (one attempt here, --max-attempts 1),
    the failure is logged with the S3 request id, and the version already stored stays."""
    # One process: the figures are the gateway's budgets, which --workers N divides.
    server = SquallProcess(tmp_path / "data", ["--backend-bandwidth", "16KiB/s",
                                               "--cache-size", "2MiB", "--workers", "1"]).start()
    mount = None
    try:
        from tests.conftest import make_client

        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="throttled")
        previous = os.urandom(MiB)
        s3.put_object(Bucket="throttled", Key="busy.bin", Body=previous)  # dirty for ~60 s
        mount = MountProcess(server.endpoint, "throttled", tmp_path / "mnt",
                             ["--max-attempts", "1"]).start()
        fd = os.open(mount.path / "busy.bin", os.O_WRONLY | os.O_TRUNC)
        os.write(fd, os.urandom(3 * MiB))
        with pytest.raises(OSError) as info:
            os.close(fd)
        assert info.value.errno == errno.ENOSPC
        assert re.search(r"ERROR .*writing busy.bin failed; the file's data is not stored: "
                         r"503 SlowDown: .* \(request id [0-9A-F]+\)", mount.log()), mount.log()
        assert s3.get_object(Bucket="throttled", Key="busy.bin")["Body"].read() == previous
    finally:
        if mount is not None:
            mount.kill()
        server.kill()
