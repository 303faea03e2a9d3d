"""Which pages of a file are in the page cache (mincore(2))."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def writes_direct(directory: Path) -> bool:
    """Whether the file system of ``directory`` opens files with O_DIRECT."""
    probe = directory / ".direct-probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT))
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)
    return True


def resident_pages(path: Path, start: int, end: int) -> int:
    """Pages of ``[start, end)`` of the file that are in the page cache (mincore(2) of a
    mapping of it, which reads nothing)."""
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    vector = (ctypes.c_ubyte * pages)()
    with path.open("rb") as f:
        address = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
    assert address not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
    try:
        assert _libc.mincore(address, size, vector) == 0, os.strerror(ctypes.get_errno())
    finally:
        _libc.munmap(address, size)
    first, last = start // mmap.PAGESIZE, -(-end // mmap.PAGESIZE)
    return sum(vector[i] & 1 for i in range(first, last))
