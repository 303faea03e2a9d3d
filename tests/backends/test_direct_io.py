"""Writes whose aligned middle bypasses the page cache: the bytes in the file are the
bytes written, whatever the offsets and piece sizes; the middle leaves no page in the page
cache; file systems and writes that refuse O_DIRECT get the page cache instead."""

from __future__ import annotations

import errno
import fcntl
import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends import direct_io
from backends.direct_io import ALIGN, MIN_DIRECT, DirectWriter
from tests.support.page_cache import resident_pages, writes_direct
from tests.support.reflink_fs import reflink_fs

MiB = 1 << 20


@pytest.fixture
def direct_dir(tmp_path: Path) -> Path:
    if not writes_direct(tmp_path):
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT")
    return tmp_path


def _pieces(rng: random.Random, total: int) -> Iterator[bytes]:
    while total > 0:
        n = min(total, rng.choice((1, 100, 4095, 4096, 4097, 65536, 300_001, MiB)))
        total -= n
        yield rng.randbytes(n)


def _write(path: Path, batches: list[list[bytes]], offset: int, *,
           enabled: bool = True) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    writer = DirectWriter(path, fd, enabled=enabled)
    try:
        at = offset
        for batch in batches:
            at += writer.write(batch, at)
        os.fsync(fd)
    finally:
        writer.close()
        os.close(fd)


def _all_cached(path: Path) -> bool:
    size = path.stat().st_size
    return resident_pages(path, 0, size) == -(-size // ALIGN)


@pytest.mark.parametrize("offset", [0, 1, ALIGN - 1, ALIGN, 5 * MiB + 123])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_file_holds_the_bytes_written_whatever_the_offsets_and_pieces(
        direct_dir: Path, offset: int, seed: int) -> None:
    rng = random.Random(seed)
    batches = [list(_pieces(rng, rng.choice((10, MIN_DIRECT - 1, MIN_DIRECT + 7, 3 * MiB))))
               for _ in range(6)]
    path = direct_dir / "f"
    path.write_bytes(b"x" * offset)  # what lies before is kept
    _write(path, batches, offset)
    assert path.read_bytes() == b"x" * offset + b"".join(b"".join(b) for b in batches)


def test_only_the_partial_pages_at_the_ends_of_batches_stay_in_the_page_cache(
        direct_dir: Path) -> None:
    path = direct_dir / "f"
    data = random.Random(0).randbytes(8 * MiB + 100)
    batches = [[data[i:i + MiB]] for i in range(0, len(data), MiB)]
    _write(path, batches, 10)
    pages = -(-(10 + len(data)) // ALIGN)
    # each batch starts and ends inside a page (10 bytes in): two partial pages a batch
    assert resident_pages(path, 0, 10 + len(data)) <= 2 * len(batches) < pages // 100
    assert path.read_bytes()[10:] == data


def test_a_file_system_that_refuses_o_direct_gets_the_page_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Injected fault: the file systems that refuse O_DIRECT at open (tmpfs before Linux
    # 6.6, many FUSE and network file systems) are not at hand here.
    real = os.open

    def open_(path: Path, flags: int, *args: int) -> int:
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(path, flags, *args)

    monkeypatch.setattr(direct_io.os, "open", open_)
    data = random.Random(1).randbytes(3 * MiB + 5)
    path = tmp_path / "f"
    _write(path, [[data[:MiB]], [data[MiB:]]], 0)
    assert _all_cached(path)
    assert path.read_bytes() == data


def test_a_write_refused_with_einval_goes_through_the_page_cache_from_then_on(
        direct_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Injected fault: a file system that opens with O_DIRECT but refuses the write (some
    # FUSE and network file systems) cannot be had here.
    real = os.pwrite
    refused = []

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset)

    monkeypatch.setattr(direct_io.os, "pwrite", pwrite)
    data = random.Random(2).randbytes(4 * MiB + 17)
    path = direct_dir / "f"
    _write(path, [[data[:2 * MiB]], [data[2 * MiB:]]], 0)
    assert refused == [0]  # the second batch did not try again
    assert _all_cached(path)
    assert path.read_bytes() == data


def test_a_short_direct_write_has_its_rest_written_through_the_page_cache(
        direct_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Injected fault: a short write (a signal, a nearly full disk) cannot be had on demand.
    real = os.pwrite
    shortened = []

    def pwrite(fd: int, data: memoryview, offset: int) -> int:
        if not shortened and len(data) > ALIGN:
            shortened.append(offset)
            return real(fd, data[:ALIGN], offset)
        return real(fd, data, offset)

    monkeypatch.setattr(direct_io.os, "pwrite", pwrite)
    data = random.Random(3).randbytes(2 * MiB + 1)
    path = direct_dir / "f"
    _write(path, [[data]], 0)
    assert shortened and path.read_bytes() == data


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_pieces_that_are_not_bytes_are_written_too(direct_dir: Path, kind: type) -> None:
    data = random.Random(4).randbytes(MiB + 3)
    path = direct_dir / "f"
    _write(path, [[kind(data[:1000]), kind(data[1000:])]], 7)  # type: ignore[list-item]
    assert path.read_bytes()[7:] == data


def test_a_writer_turned_off_writes_through_the_page_cache(direct_dir: Path) -> None:
    data = random.Random(5).randbytes(2 * MiB)
    path = direct_dir / "f"
    _write(path, [[data]], 0, enabled=False)
    assert _all_cached(path)
    assert path.read_bytes() == data


def _source(path: Path, size: int, seed: int) -> bytes:
    """A file of ``size`` random bytes, none of them in the page cache."""
    data = random.Random(seed).randbytes(size)
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return data


def _copy(src: Path, dst: Path, count: int, *, src_offset: int, offset: int,
          enabled: bool = True) -> None:
    src_fd = os.open(src, os.O_RDONLY)
    fd = os.open(dst, os.O_RDWR | os.O_CREAT, 0o644)
    writer = DirectWriter(dst, fd, enabled=enabled)
    try:
        writer.copy(src_fd, count, src_offset=src_offset, offset=offset)
        os.fsync(fd)
    finally:
        writer.close()
        os.close(fd)
        os.close(src_fd)


@pytest.mark.parametrize("count", [100, MIN_DIRECT + 1, direct_io.COPY_CHUNK * 2 + 5])
@pytest.mark.parametrize("src_offset", [0, 16, ALIGN - 1, ALIGN])
@pytest.mark.parametrize("offset", [0, 10])
@pytest.mark.parametrize("enabled", [True, False])
def test_a_copy_holds_the_bytes_of_the_source_range(
        direct_dir: Path, count: int, src_offset: int, offset: int, enabled: bool) -> None:
    data = _source(direct_dir / "src", src_offset + count + 3, seed=count + src_offset)
    dst = direct_dir / "dst"
    dst.write_bytes(b"y" * offset)
    _copy(direct_dir / "src", dst, count, src_offset=src_offset, offset=offset,
          enabled=enabled)
    assert dst.read_bytes() == b"y" * offset + data[src_offset:src_offset + count]


def test_a_copy_leaves_neither_file_in_the_page_cache(direct_dir: Path) -> None:
    count = direct_io.COPY_CHUNK * 2 + 5
    data = _source(direct_dir / "src", 16 + count, seed=6)
    dst = direct_dir / "dst"
    _copy(direct_dir / "src", dst, count, src_offset=16, offset=0)
    assert resident_pages(direct_dir / "src", 0, 16 + count) == 0
    # three reads, each written with a partial page at both ends
    assert resident_pages(dst, 0, count) <= 6
    assert dst.read_bytes() == data[16:]


@pytest.mark.parametrize("count", [100, 3 * MiB])
def test_a_source_shorter_than_the_count_is_an_error(direct_dir: Path, count: int) -> None:
    _source(direct_dir / "src", count - 1, seed=7)
    with pytest.raises(OSError) as raised:
        _copy(direct_dir / "src", direct_dir / "dst", count, src_offset=0, offset=0)
    assert raised.value.errno == errno.EIO


def test_a_source_that_refuses_o_direct_is_copied_by_the_kernel(
        direct_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Injected fault: a source on a file system that refuses O_DIRECT for reads only
    # cannot be had next to one that takes it.
    real = os.open

    def open_(path: str, flags: int, *args: int) -> int:
        if flags & os.O_DIRECT and str(path).startswith("/proc/self/fd/"):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(path, flags, *args)

    monkeypatch.setattr(direct_io.os, "open", open_)
    data = _source(direct_dir / "src", 3 * MiB, seed=8)
    _copy(direct_dir / "src", direct_dir / "dst", 3 * MiB - 20, src_offset=20, offset=0)
    assert (direct_dir / "dst").read_bytes() == data[20:]
    assert _all_cached(direct_dir / "dst")


def test_a_direct_read_refused_midway_has_the_rest_copied_by_the_kernel(
        direct_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Injected fault: a read refused after others succeeded (a file system that changes
    # its mind) cannot be had on demand.
    real = os.preadv
    reads = []

    def preadv(fd: int, buffers: list[memoryview], offset: int) -> int:
        reads.append(offset)
        if len(reads) > 1:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, buffers, offset)

    monkeypatch.setattr(direct_io.os, "preadv", preadv)
    count = direct_io.COPY_CHUNK + 3 * MiB
    data = _source(direct_dir / "src", count, seed=9)
    _copy(direct_dir / "src", direct_dir / "dst", count, src_offset=0, offset=0)
    assert len(reads) == 2
    assert (direct_dir / "dst").read_bytes() == data


def test_a_copy_on_a_file_system_with_reflinks_shares_aligned_ranges(tmp_path: Path) -> None:
    with reflink_fs(tmp_path) as root:
        data = _source(root / "src", 6 * MiB, seed=10)
        os.sync()
        free = os.statvfs(root).f_bfree * os.statvfs(root).f_frsize
        _copy(root / "src", root / "shared", 4 * MiB, src_offset=ALIGN, offset=0)
        _copy(root / "src", root / "copied", 4 * MiB, src_offset=16, offset=0)
        os.sync()
        used = free - os.statvfs(root).f_bfree * os.statvfs(root).f_frsize
        assert 4 * MiB <= used < 5 * MiB  # the unaligned copy's blocks only
        assert resident_pages(root / "copied", 0, 4 * MiB) <= 2  # read and written direct
        assert (root / "shared").read_bytes() == data[ALIGN:ALIGN + 4 * MiB]
        assert (root / "copied").read_bytes() == data[16:16 + 4 * MiB]
