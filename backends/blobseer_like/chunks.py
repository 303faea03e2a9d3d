"""Striped chunk I/O: a writer that fans a body out over the providers, and a reader
that streams a byte range back with read-ahead over them. Memory per request is bounded
by ``fanout + 1`` chunks whatever the object size."""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import hashlib
import secrets
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from backends.blobseer_like import format as fmt
from backends.blobseer_like.pins import Pin, PinSet
from backends.blobseer_like.pool import ProviderPool
from backends.blobseer_like.provider import Provider
from backends.core.blocking import run_blocking


async def settled(futures: Iterable[asyncio.Future[Any]]) -> None:
    """Wait until every future is done, without raising their outcomes."""
    pending = [f for f in futures if not f.done()]
    if pending:
        await asyncio.wait(pending)
    for future in futures:
        if future.done() and not future.cancelled():
            future.exception()  # mark retrieved


def starts_of(chunks: Sequence[fmt.ChunkRef]) -> list[int]:
    """The offset of every chunk in the blob, plus the blob size at the end."""
    out = [0]
    for ref in chunks:
        out.append(out[-1] + ref.size)
    return out


def pieces(chunks: Sequence[fmt.ChunkRef], start: int,
           length: int) -> list[tuple[fmt.ChunkRef, int, int]]:
    """(chunk, from, to) slices that make up ``length`` bytes of the blob from ``start``."""
    if length <= 0:
        return []
    starts = starts_of(chunks)
    first = bisect.bisect_right(starts, start) - 1
    out = []
    end = start + length
    for i in range(first, len(chunks)):
        lo, hi = max(start, starts[i]), min(end, starts[i + 1])
        if lo >= hi:
            break
        out.append((chunks[i], lo - starts[i], hi - starts[i]))
    return out


class ChunkWriter:
    """Cuts bytes into chunks and writes up to ``fanout`` of them at once, round-robin
    over the active providers. Every chunk id is pinned before its file exists.

    End every use with :meth:`release` after a commit, or :meth:`discard` (which removes
    the chunks written) when the write is abandoned.
    """

    def __init__(self, pool: ProviderPool, pins: PinSet, chunk_size: int, *,
                 md5: bool = True) -> None:
        self._pool = pool
        self._pins = pins
        self._chunk = chunk_size
        self._start = pool.start()
        self._shard = secrets.token_hex(1)  # all chunks of one write share a directory
        self._slots = asyncio.Semaphore(pool.fanout())
        self._refs: list[fmt.ChunkRef | None] = []
        self._tasks: list[asyncio.Future[None]] = []
        self._written: list[tuple[Provider, str]] = []
        self._buffer = bytearray()
        self._md5 = hashlib.md5() if md5 else None
        self._hashing: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._pin = Pin()
        self.size = 0

    @property
    def md5(self) -> bytes:
        """The MD5 of everything written (after :meth:`finish`)."""
        assert self._md5 is not None
        return self._md5.digest()

    @property
    def count(self) -> int:
        """Chunks submitted so far."""
        return len(self._refs)

    async def consume(self, body: AsyncIterator[bytes]) -> None:
        async for piece in body:
            await self.feed(piece)

    async def feed(self, data: bytes | bytearray) -> None:
        if not data:
            return
        if not self._buffer and len(data) >= self._chunk:
            view = memoryview(data)
            whole = len(data) - len(data) % self._chunk
            for offset in range(0, whole, self._chunk):
                await self._submit(bytes(view[offset:offset + self._chunk]))
            self._buffer += view[whole:]
            return
        self._buffer += data
        while len(self._buffer) >= self._chunk:
            chunk = bytes(self._buffer[:self._chunk])
            del self._buffer[:self._chunk]
            await self._submit(chunk)

    async def cut(self) -> None:
        """End the current chunk here (short if need be): what follows starts a new one."""
        if self._buffer:
            data, self._buffer = bytes(self._buffer), bytearray()
            await self._submit(data)

    async def _submit(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        await self._slots.acquire()
        if self._md5 is not None:
            if self._hashing is not None:
                await asyncio.shield(self._hashing)
            self._hashing = asyncio.ensure_future(run_blocking(self._md5.update, data))
        index = len(self._refs)
        provider = self._pool.place(self._start, index)
        chunk_id = fmt.new_id(self._shard)
        self._pins.pin([chunk_id], into=self._pin)
        self._written.append((provider, chunk_id))
        self._refs.append(None)
        self.size += len(data)
        self._tasks.append(asyncio.ensure_future(self._write(index, provider, chunk_id, data)))

    async def _write(self, index: int, provider: Provider, chunk_id: str, data: bytes) -> None:
        try:
            crc = await provider.write(chunk_id, data)
            self._refs[index] = fmt.ChunkRef(provider.id, chunk_id, len(data), crc)
            self._pool.note_ingest(len(data))
        except BaseException as exc:
            if self._error is None:
                self._error = exc
            raise
        finally:
            self._slots.release()

    async def finish(self) -> tuple[fmt.ChunkRef, ...]:
        """Write what is buffered, wait for every chunk and make their names durable."""
        await self.cut()
        await settled(self._tasks)
        if self._hashing is not None:
            await asyncio.shield(self._hashing)
        if self._error is not None:
            raise self._error
        shards = {provider.id: provider for provider, _ in self._written}
        await asyncio.gather(*(run_blocking(p.sync_shard, self._shard)
                               for p in shards.values()))
        refs = tuple(ref for ref in self._refs if ref is not None)
        assert len(refs) == len(self._refs)
        return refs

    def release(self) -> None:
        """The chunks are referenced by a committed record: stop protecting them."""
        self._pins.unpin(self._pin)

    async def discard(self) -> None:
        """Abandon the write: wait for chunk writes in flight, remove every chunk written."""
        job = asyncio.ensure_future(self._discard())
        await asyncio.shield(job)

    async def _discard(self) -> None:
        await settled(self._tasks)
        if self._hashing is not None:
            await settled([self._hashing])
        written, self._written = self._written, []
        try:
            await run_blocking(_delete_chunks, written)
        finally:
            self._pins.unpin(self._pin)


def _delete_chunks(chunks: list[tuple[Provider, str]]) -> None:
    for provider, chunk_id in chunks:
        with contextlib.suppress(OSError):  # left to the garbage collector
            provider.delete_chunk(chunk_id)


class ChunkStream:
    """An async iterator over a byte range of a blob, reading up to ``readahead`` chunks
    ahead (from different providers, in parallel); every chunk is verified. Owns a pin
    on the chunks, released by :meth:`aclose` (also when nothing was read)."""

    def __init__(self, pool: ProviderPool, pins: PinSet, pin: Pin,
                 slices: list[tuple[fmt.ChunkRef, int, int]], readahead: int) -> None:
        self._pool = pool
        self._pins = pins
        self._pin: Pin | None = pin
        self._slices = collections.deque(slices)
        self._inflight: collections.deque[asyncio.Future[bytes]] = collections.deque()
        self._readahead = max(1, readahead)

    def __aiter__(self) -> ChunkStream:
        return self

    def _fill(self) -> None:
        while self._slices and len(self._inflight) < self._readahead:
            ref, lo, hi = self._slices.popleft()
            self._inflight.append(asyncio.ensure_future(self._read(ref, lo, hi)))

    async def _read(self, ref: fmt.ChunkRef, lo: int, hi: int) -> bytes:
        data = await self._pool.get(ref.provider).read(ref.id, ref.size, ref.crc)
        return data if (lo, hi) == (0, ref.size) else data[lo:hi]

    async def prefetch(self) -> None:
        """Start reading and wait for the first chunk, so that a missing or corrupted
        first chunk fails the request before any byte is sent."""
        self._fill()
        if self._inflight:
            await asyncio.wait([self._inflight[0]])
            error = self._inflight[0].exception()
            if error is not None:
                await self.aclose()
                raise error

    async def __anext__(self) -> bytes:
        self._fill()
        if not self._inflight:
            await self.aclose()
            raise StopAsyncIteration
        future = self._inflight[0]
        try:
            data = await asyncio.shield(future)
        except BaseException:
            await self.aclose()
            raise
        self._inflight.popleft()
        self._fill()
        return data

    async def aclose(self) -> None:
        inflight, self._inflight = list(self._inflight), collections.deque()
        self._slices.clear()
        for future in inflight:
            future.cancel()
        await settled(inflight)
        if self._pin is not None:
            self._pins.unpin(self._pin)
            self._pin = None

    def __del__(self) -> None:
        # Safety net for a caller that never closes the stream: drop the pin.
        if self._pin is not None and not self._inflight:
            self._pins.unpin(self._pin)
            self._pin = None
