"""Streaming the payload of cache records (whole or a byte range): inline segments from
memory (no thread, no pin), data files with as few worker-thread calls as possible
(one for a piece up to a chunk: open, read and close together)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

from backends.core.base import BodyFacts, ByteRange, ObjectStream, Relay
from backends.core.blocking import run_cache_blocking
from backends.core.regions import FileRegion
from backends.core.streams import ClosingBody, CountingBody
from gateway.cache.entry import Entry, Segment
from gateway.cache.store import CacheStore
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
        vol = store.space.volumes[seg.volume]
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


class FilesBody:
    """The bytes of ``pieces`` that all lie in data files: read in chunks, or given to
    the server whole as regions of the open files (:meth:`take_regions`)."""

    __slots__ = ("_chunk_size", "_chunks", "_pieces", "_readers", "_store")

    def __init__(self, store: CacheStore, pieces: list[Slice], chunk_size: int) -> None:
        self._store = store
        self._pieces = pieces
        self._chunk_size = chunk_size
        self._chunks: AsyncIterator[bytes] | None = None
        self._readers: list[DataFileReader] = []

    def __aiter__(self) -> FilesBody:
        return self

    async def __anext__(self) -> bytes:
        if self._chunks is None:
            self._chunks = read_slices(self._store, self._pieces, self._chunk_size)
        return await self._chunks.__anext__()

    async def take_regions(self) -> list[FileRegion] | None:
        if self._chunks is not None:
            return None  # reading has begun
        self._chunks = MemoryBody([])  # from now on, read to its end
        self._readers = await run_cache_blocking(self._open_all)
        return [reader.region(offset, length)
                for reader, (_seg, offset, length) in zip(self._readers, self._pieces, strict=True)]

    def _open_all(self) -> list[DataFileReader]:
        readers: list[DataFileReader] = []
        try:
            for seg, _offset, _length in self._pieces:
                readers.append(DataFileReader(self._store.space.volumes[seg.volume], seg.file))
        except BaseException:
            _close_all(readers)
            raise
        return readers

    async def aclose(self) -> None:
        chunks, self._chunks = self._chunks, MemoryBody([])
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()
        readers, self._readers = self._readers, []
        if readers:
            await run_cache_blocking(_close_all, readers)


def _close_all(readers: list[DataFileReader]) -> None:
    for reader in readers:
        reader.close()


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


def backend_body(store: CacheStore, segments: Sequence[Segment], count: Callable[[int], None],
                 hasher: Callable[[bytes], None] | None = None, *,
                 checksum: tuple[str, str] | None = None,
                 md5: str | None = None) -> Relay:
    """The bytes of ``segments`` for the backend, each chunk counted by ``count`` (and
    hashed by ``hasher``), their length declared. Without ``hasher``, data files are offered
    as file regions with their ``md5``: a posix backend copies them file to file."""
    pieces = slices(segments, None)
    chunk_size = store.settings.chunk_size
    length = sum(seg.size for seg in segments)
    if hasher is None and all(seg.inline is None for seg in segments):
        files = FilesBody(store, pieces, chunk_size)
        facts = BodyFacts(checksum=checksum, declared_length=length,
                          verified_md5=bytes.fromhex(md5) if md5 else None)
        return Relay(ClosingBody(CountingBody(files, count)), facts)

    async def body() -> AsyncIterator[bytes]:
        async for chunk in read_slices(store, pieces, chunk_size):
            if hasher is not None:
                hasher(chunk)
            count(len(chunk))
            yield chunk
    return Relay(ClosingBody(body()), BodyFacts(checksum=checksum, declared_length=length))


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
    store.space.pin(files)

    async def unpin(_done: bool) -> None:
        await store.space.unpin(files)

    return ClosingBody(FilesBody(store, pieces, chunk_size) if len(files) == len(segments)
                       else read_slices(store, pieces, chunk_size), unpin)


def entry_stream(store: CacheStore, entry: Entry, byte_range: ByteRange | None) -> ObjectStream:
    body = open_pinned(store, entry.segments, byte_range, store.settings.chunk_size)
    return ObjectStream(entry.info(), body, byte_range)
