"""File writes whose page-aligned middle bypasses the page cache (``O_DIRECT``).

An object written through the page cache takes a page of memory for every 4 KiB it
holds: the kernel allocates and fills it, writes it back at fsync, and keeps it, evicting
pages that reads would have used again (an object just written is rarely read at once).
Here the aligned middle of each batch of a file's bytes is copied into a reused,
page-aligned buffer and written with ``O_DIRECT`` through a second descriptor of the same
file; the partial pages at both ends of the batch go through the page cache as before
(a page is never written both ways), and the caller's fsync covers both. A file system
that refuses ``O_DIRECT`` (tmpfs before Linux 6.6, many FUSE and network file systems:
EINVAL at open or at the first write) gets every byte through the page cache.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading
from collections.abc import Sequence

from backends.files import clone_range, copy_data, pwrite_all, pwritev_all

#: the alignment of O_DIRECT offsets, lengths and buffers (a page: also a multiple of
#: every logical block size in use)
ALIGN = 4096
#: batches with less than this to write aligned go through the page cache
MIN_DIRECT = 256 * 1024
#: bytes read per O_DIRECT read of a copy
COPY_CHUNK = 4 << 20
#: idle aligned buffers kept for reuse (a new one is fresh memory: its pages are faulted
#: in at first use)
_POOL_SIZE = 8

#: a piece of a batch: bytes are written as they are, others must not change meanwhile
Piece = bytes | bytearray | memoryview

_REFUSED = {errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}


class _Buffers:
    """A pool of page-aligned buffers (anonymous mappings), reused across files."""

    def __init__(self) -> None:
        self._idle: list[ctypes.Array[ctypes.c_char]] = []
        self._lock = threading.Lock()

    def take(self, size: int) -> ctypes.Array[ctypes.c_char]:
        with self._lock:
            for i, buf in enumerate(self._idle):
                if len(buf) >= size:
                    return self._idle.pop(i)
        capacity = -(-size // (1 << 20)) << 20
        return (ctypes.c_char * capacity).from_buffer(mmap.mmap(-1, capacity))

    def give(self, buf: ctypes.Array[ctypes.c_char]) -> None:
        with self._lock:
            if len(self._idle) < _POOL_SIZE:
                self._idle.append(buf)


_buffers = _Buffers()


class DirectWriter:
    """Writes batches of a file's bytes at given offsets, each batch's aligned middle with
    ``O_DIRECT`` (unless ``enabled`` is False: all through ``fd``); every byte is in the
    file (readable) when :meth:`write` returns. :meth:`close` closes the second
    descriptor."""

    def __init__(self, path: str | os.PathLike[str], fd: int, *, enabled: bool = True
                 ) -> None:
        self._path = path
        self._fd = fd
        self._direct = -1  # opened at the first batch large enough
        self._refused = not enabled

    def write(self, pieces: Sequence[Piece], offset: int) -> int:
        """Write ``pieces`` one after the other at ``offset``; their byte count."""
        total = sum(len(piece) for piece in pieces)
        head = -offset % ALIGN
        aligned = (total - head) // ALIGN * ALIGN
        if aligned < MIN_DIRECT or not self._open():
            pwritev_all(self._fd, pieces, offset)
            return total
        if head:
            pwritev_all(self._fd, _cut(pieces, 0, head), offset)
        self._write_aligned(pieces, head, aligned, offset + head)
        if total > head + aligned:
            pwritev_all(self._fd, _cut(pieces, head + aligned, total - head - aligned),
                        offset + head + aligned)
        return total

    def copy(self, src_fd: int, count: int, *, src_offset: int, offset: int) -> None:
        """Copy ``count`` bytes of the file ``src_fd`` from ``src_offset`` to ``offset``:
        a reflink where the file system shares blocks; else read with ``O_DIRECT`` into a
        reused buffer and written as :meth:`write` does, so neither file's bytes fill the
        page cache; copy_file_range where that is not possible (writes through the page
        cache, fewer than ``MIN_DIRECT`` bytes, a source on a file system that refuses
        ``O_DIRECT``). Raises OSError(EIO) when the source is shorter than ``count``."""
        src, done = -1, 0
        if count >= MIN_DIRECT:
            if clone_range(src_fd, self._fd, count, src_offset=src_offset, dst_offset=offset):
                return
            if self._open():
                src = self._open_source(src_fd)
        if src >= 0:
            buf = _buffers.take(COPY_CHUNK + ALIGN)
            try:
                done = self._copy_direct(src, buf, count, src_offset, offset)
            finally:
                _buffers.give(buf)
                os.close(src)
        if done < count:
            copy_data(src_fd, self._fd, count - done, src_offset=src_offset + done,
                      dst_offset=offset + done, chunk_size=COPY_CHUNK)

    def _copy_direct(self, src: int, buf: ctypes.Array[ctypes.c_char], count: int,
                     src_offset: int, offset: int) -> int:
        """The bytes copied before the end or a refused read (then copied otherwise)."""
        view = memoryview(buf).cast("B")
        done = 0
        while done < count:
            start = src_offset + done
            skip = start % ALIGN
            want = -(-min(COPY_CHUNK, skip + count - done) // ALIGN) * ALIGN
            try:
                got = os.preadv(src, [view[:want]], start - skip)
            except OSError as exc:
                if exc.errno not in _REFUSED:
                    raise
                return done
            n = min(got - skip, count - done)
            if n <= 0:
                raise OSError(errno.EIO, "source shorter than expected")
            self.write([view[skip:skip + n]], offset + done)
            done += n
        return done

    @staticmethod
    def _open_source(fd: int) -> int:
        """A second, ``O_DIRECT`` descriptor of the file ``fd``; -1 if refused (or without
        ``/proc``: the copy then goes the usual way, which reports real errors)."""
        try:
            return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_DIRECT)
        except OSError:
            return -1

    def _open(self) -> bool:
        """Whether the O_DIRECT descriptor is open (opened now if need be)."""
        if self._direct < 0 and not self._refused:
            try:
                self._direct = os.open(self._path, os.O_WRONLY | os.O_DIRECT)
            except OSError as exc:
                if exc.errno not in _REFUSED:
                    raise
                self._refused = True
        return self._direct >= 0

    def close(self) -> None:
        direct, self._direct = self._direct, -1
        if direct >= 0:
            os.close(direct)

    def _write_aligned(self, pieces: Sequence[Piece], start: int, count: int,
                       offset: int) -> None:
        buf = _buffers.take(count)
        try:
            base = ctypes.addressof(buf)
            view = memoryview(buf).cast("B")[:count]
            filled = 0
            for piece, at, n in _spans(pieces, start, count):
                address = _address(piece)
                if address:  # ctypes' memmove releases the GIL as it copies
                    ctypes.memmove(base + filled, address + at, n)
                else:
                    view[filled:filled + n] = memoryview(piece).cast("B")[at:at + n]
                filled += n
            try:
                written = os.pwrite(self._direct, view, offset)
            except OSError as exc:
                if exc.errno not in _REFUSED:
                    raise
                self.close()  # this file system takes no O_DIRECT write: page cache
                self._refused = True
                written = 0
            if written < count:  # a short write (a signal, a full disk): the rest as is
                pwrite_all(self._fd, view[written:], offset + written)
        finally:
            _buffers.give(buf)


def _address(piece: Piece) -> int:
    """Where the bytes of ``piece`` are (valid while it lives; no copy); 0 for a
    read-only view, whose address Python does not give."""
    if type(piece) is bytes:
        return ctypes.cast(ctypes.c_char_p(piece), ctypes.c_void_p).value or 0
    if memoryview(piece).readonly:
        return 0
    return ctypes.addressof(ctypes.c_char.from_buffer(piece))


def _spans(pieces: Sequence[Piece], start: int, count: int) -> list[tuple[Piece, int, int]]:
    """``(piece, offset in it, length)`` of bytes ``[start, start + count)`` of the
    pieces laid end to end."""
    out = []
    for piece in pieces:
        size = len(piece)
        if start >= size:
            start -= size
            continue
        n = min(size - start, count)
        out.append((piece, start, n))
        count -= n
        start = 0
        if not count:
            break
    return out


def _cut(pieces: Sequence[Piece], start: int, count: int) -> list[memoryview]:
    return [memoryview(piece)[at:at + n] for piece, at, n in _spans(pieces, start, count)]
