"""Reads of one object version: sequential read-ahead in blocks, ranged GETs otherwise."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from typing import Any

from gateway.fuse_mount.store import BucketClient, RemoteObject


class _Block:
    """One block of the object: a buffer that one ranged GET fills from the socket, and who
    still uses it (its fetch, reads copying out of it). A dropped block's buffer is reused
    once nobody does."""

    __slots__ = ("address", "buffer", "dropped", "fetching", "future", "length", "readers",
                 "recycled")

    def __init__(self, buffer: bytearray, length: int) -> None:
        self.buffer = buffer
        self.address: int = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
        self.length = length
        self.fetching = True
        self.readers = 0
        self.dropped = False
        self.recycled = False
        self.future: Future[None] | None = None


class Chunk:
    """The bytes of one read, still in the fetched blocks (one part per block: a read that
    spans two blocks is not joined). ``copy_to`` copies them straight into the kernel's
    buffer; the blocks are kept from reuse until then. A chunk is consumed once:
    ``copy_to`` or ``bytes()`` (or ``release`` to drop it unread)."""

    __slots__ = ("_parts", "_release", "length")

    def __init__(self, parts: Sequence[tuple[_Block, int, int]],
                 release: Callable[[], None]) -> None:
        self._parts = parts  # (block, start in it, length)
        self._release: Callable[[], None] | None = release
        self.length = sum(n for _, _, n in parts)

    def copy_to(self, dest: Any, size: int) -> int:
        """Copy the bytes to the C buffer ``dest`` of ``size`` bytes; their count."""
        try:
            if self.length > size:
                raise ValueError(f"read returned {self.length} bytes, more than {size}")
            base = ctypes.cast(dest, ctypes.c_void_p).value or 0
            for block, start, n in self._parts:
                ctypes.memmove(base, block.address + start, n)  # GIL released meanwhile
                base += n
            return self.length
        finally:
            self.release()

    def __bytes__(self) -> bytes:
        try:
            return b"".join(ctypes.string_at(block.address + start, n)
                            for block, start, n in self._parts)
        finally:
            self.release()

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


class ReadAhead:
    """One handle's read stream over an object version (every GET is ``If-Match`` its ETag:
    a version replaced by another client reads as ESTALE, never as a mix of versions).

    A read that continues the previous one (or lands in a block already fetched) is
    sequential: it is served from whole blocks fetched with ranged GETs, and the next
    ``window`` blocks are prefetched in the background. At most ``window + 2`` blocks are
    held, and their buffers are reused for the next blocks (no fresh memory to fault in per
    block). Any other read is a ranged GET of exactly the bytes asked for. The version comes
    with every read; when it changes (this mount renamed or re-stored the file), blocks
    of the previous one are dropped.
    """

    def __init__(self, store: BucketClient, *, block_size: int, window: int,
                 pool: Executor) -> None:
        self._store = store
        self._block = block_size
        self._window = window
        self._pool = pool
        self._lock = threading.Lock()  # guards the fields below; no I/O under it
        self._blocks: dict[int, _Block] = {}
        self._free: list[bytearray] = []  # buffers of block_size, ready for reuse
        self._closed = False
        self._version: tuple[str, str, int] | None = None
        self._last_end = 0

    def read(self, meta: RemoteObject, offset: int, size: int) -> bytes | Chunk:
        end = min(offset + size, meta.size)
        if offset >= end:
            return b""
        first, last = offset // self._block, (end - 1) // self._block
        with self._lock:
            self._closed = False
            if self._version != (meta.key, meta.etag, meta.size):
                self._drop()
                self._version = (meta.key, meta.etag, meta.size)
            sequential = offset == self._last_end or first in self._blocks
            self._last_end = end
            if sequential:
                for i in [i for i in self._blocks if i < first or i > last + self._window]:
                    self._evict(i)  # first: its buffer may serve the blocks fetched next
                blocks = [self._fetch(meta, i) for i in range(first, last + 1)]
                for block in blocks:
                    block.readers += 1
                for i in range(last + 1, min(last + 1 + self._window,
                                             -(-meta.size // self._block))):
                    self._fetch(meta, i)
        if not sequential:
            return self._store.get_range(meta.key, offset, end, if_match=meta.etag)
        try:
            for block in blocks:
                assert block.future is not None
                block.future.result()
        except BaseException:
            with self._lock:
                for i, block in enumerate(blocks, first):
                    if self._blocks.get(i) is block:
                        self._evict(i)
            self._done(blocks)
            raise
        parts = []
        position = offset
        for i, block in enumerate(blocks, first):
            n = min(end, (i + 1) * self._block) - position
            parts.append((block, position - i * self._block, n))
            position += n
        return Chunk(parts, lambda: self._done(blocks))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._drop()
            self._free.clear()

    def _done(self, blocks: Sequence[_Block]) -> None:
        """A read has copied its bytes out of ``blocks``."""
        with self._lock:
            for block in blocks:
                block.readers -= 1
                self._recycle(block)

    def _drop(self) -> None:
        for i in list(self._blocks):
            self._evict(i)

    def _evict(self, index: int) -> None:
        block = self._blocks.pop(index)
        block.dropped = True
        if block.fetching and not block.readers and block.future is not None \
                and block.future.cancel():  # never started: nothing writes its buffer
            block.fetching = False
        self._recycle(block)

    def _recycle(self, block: _Block) -> None:
        if (block.dropped and not block.fetching and not block.readers and not block.recycled
                and not self._closed and len(block.buffer) == self._block
                and len(self._free) + len(self._blocks) < self._window + 2):
            block.recycled = True
            self._free.append(block.buffer)

    def _fetch(self, meta: RemoteObject, index: int) -> _Block:
        block = self._blocks.get(index)
        if block is None:
            start = index * self._block
            length = min(self._block, meta.size - start)
            if self._free:
                buffer = self._free.pop()
            else:  # a whole block's buffer for reuse; a smaller object's exactly its size
                buffer = bytearray(self._block if length == self._block else length)
            block = _Block(buffer, length)
            block.future = self._pool.submit(self._run, block, meta.key, start, meta.etag)
            self._blocks[index] = block
        return block

    def _run(self, block: _Block, key: str, start: int, etag: str) -> None:
        """Fetch one block (in a pool thread)."""
        try:
            self._store.get_into(key, start, memoryview(block.buffer)[:block.length],
                                 if_match=etag)
        finally:
            with self._lock:
                block.fetching = False
                self._recycle(block)
