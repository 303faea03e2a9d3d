"""Blocking file helpers: writes of many pieces at an offset."""

from __future__ import annotations

import os
from pathlib import Path

from backends.files import pwritev_all


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
