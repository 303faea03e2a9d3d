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
