"""Blocking file helpers: writes of many pieces at an offset, ranges shared by reflink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backends.files import clone_range, pwritev_all
from tests.support.reflink_fs import reflink_fs


def test_pieces_are_written_in_order_at_the_offset_beyond_one_system_call(
        tmp_path: Path) -> None:
    pieces = [bytes([i % 256]) * (i % 7 + 1) for i in range(1500)]  # > one call's pieces
    path = tmp_path / "f"
    path.write_bytes(b"head")
    fd = os.open(path, os.O_RDWR)
    try:
        pwritev_all(fd, pieces, 4)
        pwritev_all(fd, [], 4)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"head" + b"".join(pieces)


def test_a_file_system_without_shared_blocks_clones_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(os.urandom(1 << 20))
    dst.write_bytes(b"")
    with src.open("rb") as s, dst.open("r+b") as d:
        if clone_range(s.fileno(), d.fileno(), 1 << 20, src_offset=0, dst_offset=0):
            pytest.skip(f"the file system of {tmp_path} shares blocks")  # btrfs, XFS
    assert dst.read_bytes() == b""


def test_a_clone_of_an_unaligned_range_is_refused_without_an_error(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(os.urandom(3 * 4096))
    dst.write_bytes(b"")
    with src.open("rb") as s, dst.open("r+b") as d:
        assert not clone_range(s.fileno(), d.fileno(), 4096, src_offset=16, dst_offset=0)
    assert dst.read_bytes() == b""


def _free(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bfree * stat.f_frsize


def test_a_reflink_file_system_shares_an_aligned_range(tmp_path: Path) -> None:
    with reflink_fs(tmp_path) as root:
        data = os.urandom(8 << 20)
        src, dst = root / "src", root / "dst"
        src.write_bytes(data)
        dst.write_bytes(b"")
        os.sync()
        free = _free(root)
        with src.open("rb") as s, dst.open("r+b") as d:
            assert clone_range(s.fileno(), d.fileno(), 4 << 20, src_offset=4096,
                               dst_offset=8192)
            assert not clone_range(s.fileno(), d.fileno(), 4 << 20, src_offset=16,
                                   dst_offset=0)  # not block-aligned: refused, no error
        os.sync()
        assert dst.read_bytes() == bytes(8192) + data[4096:4096 + (4 << 20)]
        assert free - _free(root) < 1 << 20  # shared blocks: no 4 MiB taken
