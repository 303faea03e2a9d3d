"""Reads of one object version: sequential read-ahead in blocks, ranged GETs otherwise."""

from __future__ import annotations

import threading
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from gateway.fuse_mount.store import BucketClient, RemoteObject


@dataclass(frozen=True, slots=True)
class Chunk:
    """Bytes ``[start, start + length)`` of a fetched block, handed to the kernel's buffer
    straight from the block (no copy of the slice)."""

    data: bytes
    start: int
    length: int

    def __bytes__(self) -> bytes:
        return self.data[self.start:self.start + self.length]


class ReadAhead:
    """One handle's read stream over an object version (every GET is ``If-Match`` its ETag:
    a version replaced by another client reads as ESTALE, never as a mix of versions).

    A read that continues the previous one (or lands in a block already fetched) is
    sequential: it is served from whole blocks fetched with ranged GETs, and the next
    ``window`` blocks are prefetched in the background. At most ``window + 2`` blocks are
    held. Any other read is a ranged GET of exactly the bytes asked for. The version comes
    with every read; when it changes (this mount renamed or re-stored the file), blocks
    of the previous one are dropped.
    """

    def __init__(self, store: BucketClient, *, block_size: int, window: int,
                 pool: Executor) -> None:
        self._store = store
        self._block = block_size
        self._window = window
        self._pool = pool
        self._lock = threading.Lock()
        self._blocks: dict[int, Future[bytes]] = {}
        self._version: tuple[str, str, int] | None = None
        self._last_end = 0

    def read(self, meta: RemoteObject, offset: int, size: int) -> bytes | Chunk:
        end = min(offset + size, meta.size)
        if offset >= end:
            return b""
        first, last = offset // self._block, (end - 1) // self._block
        with self._lock:
            if self._version != (meta.key, meta.etag, meta.size):
                self._drop()
                self._version = (meta.key, meta.etag, meta.size)
            sequential = offset == self._last_end or first in self._blocks
            self._last_end = end
            if sequential:
                futures = [f for i in range(first, last + 1) if (f := self._fetch(meta, i))]
                for i in range(last + 1, last + 1 + self._window):
                    self._fetch(meta, i)
                for i in [i for i in self._blocks if i < first or i > last + self._window]:
                    self._blocks.pop(i).cancel()
        if not sequential:
            return self._store.get_range(meta.key, offset, end, if_match=meta.etag)
        try:
            parts = [f.result() for f in futures]
        except BaseException:
            with self._lock:
                for i in range(first, last + 1):
                    self._blocks.pop(i, None)
            raise
        start = offset - first * self._block
        if len(parts) == 1:
            return Chunk(parts[0], start, end - offset)
        return b"".join(parts)[start:start + end - offset]

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        for future in self._blocks.values():
            future.cancel()
        self._blocks.clear()

    def _fetch(self, meta: RemoteObject, index: int) -> Future[bytes] | None:
        future = self._blocks.get(index)
        start = index * self._block
        if future is None and start < meta.size:
            end = min(meta.size, start + self._block)
            future = self._pool.submit(self._store.get_range, meta.key, start, end,
                                       if_match=meta.etag)
            self._blocks[index] = future
        return future
