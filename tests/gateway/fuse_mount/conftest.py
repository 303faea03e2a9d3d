"""Real mounts of the session's gateway: ``squall mount`` processes started and unmounted here.

Every test that mounts is skipped when this machine cannot mount FUSE file systems.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


def _fuse_missing() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian package fuse3)"
    try:
        from gateway.fuse_mount.binding import require_libfuse3

        require_libfuse3()
    except (ImportError, OSError, RuntimeError) as exc:
        return f"mfusepy/libfuse3 unavailable: {exc}"
    return None


_MISSING = _fuse_missing()
# Every other module mounts.
_NO_MOUNT = {"test_attrs.py", "test_errors.py", "test_listings.py", "test_openfile_order.py",
             "test_kernel_view.py", "test_namespace.py", "test_routing.py"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if _MISSING is None:
        return
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.fspath))
        if here in path.parents and path.name not in _NO_MOUNT:
            item.add_marker(pytest.mark.skip(reason=f"cannot mount FUSE here: {_MISSING}"))


def mount_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_", "AWS_"))}
    return {**env, "SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY, **extra}


def mount_command(endpoint: str, bucket: str, mountpoint: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "gateway.fuse_mount", endpoint, bucket, str(mountpoint), *args]


def is_mounted(mountpoint: Path) -> bool:
    """From the mount table: ``os.path.ismount`` says False for a dead FUSE mount."""
    target = os.path.abspath(mountpoint)
    with open("/proc/self/mounts") as table:
        return any(line.split()[1] == target for line in table if len(line.split()) > 1)


def unmount(mountpoint: Path) -> None:
    """fusermount3 -u, lazily if the mount is busy or dead; never raises."""
    if not is_mounted(mountpoint):
        return
    for argv in (["fusermount3", "-u"], ["fusermount3", "-u", "-z"]):
        if subprocess.run([*argv, str(mountpoint)], check=False, capture_output=True
                          ).returncode == 0:
            return


class MountProcess:
    """A foreground ``squall mount`` subprocess (its PID is ours to signal)."""

    def __init__(self, endpoint: str, bucket: str, mountpoint: Path,
                 args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> None:
        self.endpoint, self.bucket, self.path = endpoint, bucket, mountpoint
        self.args = list(args)
        self.env = dict(env or {})  # added to the process's environment
        self.log_path = mountpoint.parent / f"{mountpoint.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> MountProcess:
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                mount_command(self.endpoint, self.bucket, self.path, "--log-level", "debug",
                              *self.args), env=mount_env(**self.env), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not is_mounted(self.path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"mount did not come up:\n{self.log()}")
            time.sleep(0.05)
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-8000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> int:
        """Unmount with fusermount3 -u and wait for the process to exit."""
        assert self.proc is not None
        unmount(self.path)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def signal(self, number: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(number)

    def kill(self) -> None:
        """SIGKILL (a crash), then clean up the dead mount."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        unmount(self.path)


@pytest.fixture(scope="module")
def mount_bucket(s3) -> str:  # type: ignore[no-untyped-def]
    name = f"m-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture(scope="module")
def mounted(squall: SquallProcess, mount_bucket: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[MountProcess]:
    """The module's bucket mounted on a temporary directory for the whole module."""
    mount = MountProcess(squall.endpoint, mount_bucket,
                         tmp_path_factory.mktemp("fuse") / "mnt").start()
    try:
        yield mount
    finally:
        code = mount.stop()
        assert code == 0, mount.log()


@pytest.fixture
def new_mount(squall: SquallProcess, mount_bucket: str,
              tmp_path: Path) -> Iterator[MountProcess]:
    """A mount of its own for one test (killed and unmounted whatever happens)."""
    mount = MountProcess(squall.endpoint, mount_bucket, tmp_path / "mnt").start()
    try:
        yield mount
    finally:
        mount.kill()
