"""Streaming the payload of cache records (whole or a byte range): inline segments from
memory (no thread, no pin), data files with as few worker-thread calls as possible
(one for a piece up to a chunk: open, read and close together)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from backends.base import ByteRange, ObjectStream
from backends.blocking import run_cache_blocking
from gateway.cache.entry import Entry, Segment
from gateway.cache.store import CacheStore
from gateway.cache.streams import ClosingBody
from gateway.cache.volumes import DataFileReader, read_range

Slice = tuple[Segment, int, int]  # segment, offset in its payload, length


def slices(segments: Sequence[Segment], byte_range: ByteRange | None) -> list[Slice]:
    """The (segment, offset, length) pieces covering ``byte_range`` (None: everything)."""
    total = sum(s.size for s in segments)
    start, end = (byte_range.start, byte_range.end) if byte_range else (0, total - 1)
    out: list[Slice] = []
    base = 0
    for seg in segments:
        lo, hi = max(start, base), min(end, base + seg.size - 1)
        if lo <= hi:
            out.append((seg, lo - base, hi - lo + 1))
        base += seg.size
    return out


def _inline_chunks(data: bytes, offset: int, length: int, chunk_size: int) -> list[bytes]:
    if offset == 0 and length == len(data) and length <= chunk_size:
        return [data]  # the common case: the whole payload, not copied
    view = memoryview(data)
    return [bytes(view[pos:min(pos + chunk_size, offset + length)])
            for pos in range(offset, offset + length, chunk_size)]


async def read_slices(store: CacheStore, pieces: list[Slice],
                      chunk_size: int) -> AsyncIterator[bytes]:
    """Yield the bytes of ``pieces`` in chunks of at most ``chunk_size``."""
    for seg, offset, length in pieces:
        if seg.inline is not None:
            for chunk in _inline_chunks(seg.inline.data, offset, length, chunk_size):
                yield chunk
            continue
        vol = store.volumes[seg.volume]
        if length <= chunk_size:
            yield await run_cache_blocking(read_range, vol, seg.file, offset, length)
            continue
        reader, data = await run_cache_blocking(DataFileReader.open_read, vol, seg.file,
                                                offset, chunk_size)
        ahead: asyncio.Future[bytes] | None = None
        try:
            pos, end = offset + chunk_size, offset + length
            while True:
                # Read-ahead: the next piece is read while this one is being sent.
                if pos < end:
                    ahead = asyncio.ensure_future(
                        run_cache_blocking(reader.read, pos, min(chunk_size, end - pos)))
                yield data
                if ahead is None:
                    break
                data, ahead = await ahead, None
                pos += len(data)
        finally:
            if ahead is not None:  # the file is not closed under a running read
                await asyncio.wait([ahead])
                if not ahead.cancelled():
                    ahead.exception()  # retrieved: nobody wants this piece any more
            await run_cache_blocking(reader.close)


class MemoryBody:
    """An ``AsyncIterator[bytes]`` over chunks already in memory: nothing to close, no
    task, no thread (the body of a record whose segments are all inline)."""

    __slots__ = ("_chunks",)

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks[::-1]

    def __aiter__(self) -> MemoryBody:
        return self

    async def __anext__(self) -> bytes:
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.pop()

    async def aclose(self) -> None:
        self._chunks.clear()


def open_pinned(store: CacheStore, segments: Sequence[Segment],
                byte_range: ByteRange | None,
                chunk_size: int) -> ClosingBody | MemoryBody:
    """A body over ``segments`` whose files stay on disk until the body is closed
    (inline segments need no pin: the body holds their bytes)."""
    pieces = slices(segments, byte_range)
    files = [s for s in segments if s.inline is None]
    if not files:
        return MemoryBody([chunk for seg, offset, length in pieces
                           for chunk in _inline_chunks(seg.inline.data if seg.inline else b"",
                                                       offset, length, chunk_size)])
    store.pin(files)

    async def unpin(_done: bool) -> None:
        await store.unpin(files)

    return ClosingBody(read_slices(store, pieces, chunk_size), unpin)


def entry_stream(store: CacheStore, entry: Entry, byte_range: ByteRange | None) -> ObjectStream:
    body = open_pinned(store, entry.segments, byte_range, store.settings.chunk_size)
    return ObjectStream(entry.info(), body, byte_range)
