"""Streaming the payload of cache records (whole or a byte range) from their data files."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from backends.base import ByteRange, ObjectStream
from backends.blocking import run_blocking
from gateway.cache.entry import Entry, Segment
from gateway.cache.store import CacheStore
from gateway.cache.streams import ClosingBody
from gateway.cache.volumes import DataFileReader

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


async def read_slices(store: CacheStore, pieces: list[Slice],
                      chunk_size: int) -> AsyncIterator[bytes]:
    """Yield the bytes of ``pieces`` in chunks of at most ``chunk_size``."""
    for seg, offset, length in pieces:
        reader = await run_blocking(DataFileReader, store.volumes[seg.volume], seg.file)
        try:
            pos, end = offset, offset + length
            while pos < end:
                n = min(chunk_size, end - pos)
                yield await run_blocking(reader.read, pos, n)
                pos += n
        finally:
            await run_blocking(reader.close)


def open_pinned(store: CacheStore, segments: Sequence[Segment],
                byte_range: ByteRange | None, chunk_size: int) -> ClosingBody:
    """A body over ``segments`` whose files stay on disk until the body is closed."""
    store.pin(segments)

    async def unpin(_done: bool) -> None:
        await store.unpin(segments)

    return ClosingBody(read_slices(store, slices(segments, byte_range), chunk_size), unpin)


def entry_stream(store: CacheStore, entry: Entry, byte_range: ByteRange | None) -> ObjectStream:
    body = open_pinned(store, entry.segments, byte_range, store.settings.chunk_size)
    return ObjectStream(entry.info(), body, byte_range)
