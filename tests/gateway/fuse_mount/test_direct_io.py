"""Files read and written past the kernel's page cache: those named by ``--direct-io``
(every handle), and files a program opens with ``O_DIRECT`` on any mount. Their bytes are
the same through the mount and through S3; a shared mapping of a ``--direct-io`` file is
refused (the kernel keeps no pages for it), a private one reads its bytes."""

from __future__ import annotations

import errno
import mmap
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.fuse_mount.conftest import MountProcess, unmount
from tests.gateway.fuse_mount.test_lifecycle import _wait_exit, mount_cli
from tests.support.server import SquallProcess

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def direct_mount(squall: SquallProcess, mount_bucket: str,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[MountProcess]:
    mount = MountProcess(squall.endpoint, mount_bucket, tmp_path_factory.mktemp("dio") / "mnt",
                         ["--direct-io", "ckpt/*"]).start()
    try:
        yield mount
    finally:
        assert mount.stop() == 0, mount.log()


def _write_in_pieces(path: Path, data: bytes, sizes: tuple[int, ...]) -> None:
    with path.open("wb") as f:
        at, turn = 0, 0
        while at < len(data):
            n = sizes[turn % len(sizes)]
            f.write(data[at:at + n])
            at, turn = at + n, turn + 1
        f.flush()
        os.fsync(f.fileno())


def _shared_mapping_refused(path: Path) -> bool:
    with path.open("rb") as f:
        try:
            mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ).close()
        except OSError as exc:
            assert exc.errno == errno.ENODEV
            return True
    return False


def test_a_direct_io_file_holds_its_bytes_through_the_mount_and_s3(
        direct_mount: MountProcess, s3) -> None:
    key = f"ckpt/rank-{uuid.uuid4().hex[:8]}.bin"
    data = os.urandom(12 * MiB + 4321)
    path = direct_mount.path / key.split("/")[0]
    path.mkdir(exist_ok=True)
    _write_in_pieces(direct_mount.path / key, data, (MiB, 4096, 3 * MiB + 17, 100))
    assert s3.get_object(Bucket=direct_mount.bucket, Key=key)["Body"].read() == data
    assert (direct_mount.path / key).read_bytes() == data
    with open(direct_mount.path / key, "rb") as f:  # reads at odd offsets and sizes
        f.seek(5 * MiB + 3)
        assert f.read(MiB + 1) == data[5 * MiB + 3:6 * MiB + 4]
        f.seek(len(data) - 10)
        assert f.read(100) == data[-10:]


def test_a_direct_io_file_refuses_shared_mappings_and_maps_privately(
        direct_mount: MountProcess) -> None:
    (direct_mount.path / "ckpt").mkdir(exist_ok=True)
    direct, other = direct_mount.path / "ckpt" / "mapped.bin", direct_mount.path / "mapped.bin"
    data = os.urandom(MiB + 5)
    direct.write_bytes(data)
    other.write_bytes(data)
    assert _shared_mapping_refused(direct)
    assert not _shared_mapping_refused(other)  # files not named keep the page cache
    with direct.open("rb") as f, mmap.mmap(f.fileno(), 0, mmap.MAP_PRIVATE,
                                           mmap.PROT_READ) as mapped:
        assert mapped[:] == data


def test_files_opened_with_o_direct_on_a_default_mount(mounted: MountProcess, s3) -> None:
    name = f"odirect-{uuid.uuid4().hex[:8]}.bin"
    data = os.urandom(3 * MiB)
    buf = mmap.mmap(-1, MiB)  # O_DIRECT wants aligned buffers
    fd = os.open(mounted.path / name, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        for at in range(0, len(data), MiB):
            buf[:] = data[at:at + MiB]
            assert os.pwrite(fd, buf, at) == MiB
        os.fsync(fd)
    finally:
        os.close(fd)
    assert s3.get_object(Bucket=mounted.bucket, Key=name)["Body"].read() == data
    fd = os.open(mounted.path / name, os.O_RDONLY | os.O_DIRECT)
    try:
        got = b"".join(buf[:os.preadv(fd, [buf], at)] for at in range(0, len(data), MiB))
    finally:
        os.close(fd)
    assert got == data


def test_direct_io_reaches_a_mount_started_in_the_background(
        squall: SquallProcess, mount_bucket: str, tmp_path: Path) -> None:
    mnt = tmp_path / "bg"
    mnt.mkdir()
    result = mount_cli(squall.endpoint, mount_bucket, mnt, "--background", "--log-file",
                       tmp_path / "bg.log", "--direct-io", "*.dio")
    assert result.returncode == 0, result.stderr
    try:
        (mnt / "a.dio").write_bytes(b"x" * 5000)
        assert _shared_mapping_refused(mnt / "a.dio")
        assert (mnt / "a.dio").read_bytes() == b"x" * 5000
    finally:
        unmount(mnt)
    _wait_exit(int(re.search(r"pid (\d+)", result.stderr).group(1)))  # type: ignore[union-attr]
