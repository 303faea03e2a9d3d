"""Writing a request body into a cache data file (or, small, into an inline segment)
with incremental space reservation."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from backends.core.base import DescribedBody, Relay
from backends.core.blocking import run_cache_blocking
from backends.core.errors import BadDigest, SlowDown
from gateway.cache.device import device_full, out_of_space
from gateway.cache.entry import Segment
from gateway.cache.inline import InlinePayload, inline_room
from gateway.cache.space import Claim
from gateway.cache.store import CacheStore
from gateway.cache.volumes import DataFileWriter, Volume, charge

#: an inline body up to this size is hashed on the event loop (MD5 of 64 KiB: ~80 us,
#: about three thread hops); a larger one in a worker thread
HASH_ON_LOOP_BYTES = 64 * 1024


class CacheFull(Exception):
    """The cache had no room for a new file, and the caller asked to be told at once
    (``divert_when_full``) rather than wait: nothing of the body was consumed."""


@dataclass
class Spooled:
    """A body taken into the cache: a committed data file (``writer``), or, for a small
    body, its bytes kept for an inline segment (``inline``; no file at all).
    ``overflow`` means the body turned out larger than any volume: ``writer`` (None if
    nothing was written yet) is uncommitted and ``rest`` yields what was not spooled."""

    volume: Volume
    claim: Claim
    writer: DataFileWriter | None = None
    inline: InlinePayload | None = None
    inline_md5: str = ""
    inline_name: str = ""
    overflow: bool = False
    rest: AsyncIterator[bytes] | None = None
    discarded: bool = False
    consumed: int = 0  # body bytes taken from the iterator (spooled or pending)

    @property
    def segment(self) -> Segment:
        if self.inline is not None:
            return Segment(self.volume.id, self.inline_name, len(self.inline),
                           self.inline_md5, inline=self.inline)
        assert self.writer is not None
        return Segment(self.volume.id, self.writer.name, self.writer.size, self.writer.md5())

    async def discard(self, store: CacheStore) -> None:
        """Drop the file and give its space back (shielded from cancellation; once)."""
        if self.discarded:
            return
        self.discarded = True
        writer = self.writer
        if writer is None:  # inline, or nothing written: no file, no thread
            store.space.drop_claim(self.claim)
            return

        async def run() -> None:
            try:
                await run_cache_blocking(writer.abort)
            finally:
                store.space.drop_claim(self.claim)
        await asyncio.shield(run())

    def settle(self, store: CacheStore) -> None:
        """The file was committed to the index: its space now belongs to it."""
        store.space.settle(self.claim)


async def spool(store: CacheStore, body: AsyncIterator[bytes], *,
                content_md5: bytes | None = None, wait: bool = True,
                wait_for_flushes: bool = False,
                allow_overflow: bool = False, divert_when_full: bool = False,
                on_bytes: Callable[[int], None] | None = None,
                retry_after: Callable[[], float] | None = None) -> Spooled:
    """Consume ``body`` into a new, committed (durable per settings) data file, or keep
    it in memory for an inline segment when it ends within ``inline_max_bytes`` and the
    inline memory budget has room (its durability is then the index commit's).

    Space is reserved chunk by chunk as data arrives (waiting for room when ``wait``);
    on any failure the file is removed and all its space released. With
    ``allow_overflow``, a body that cannot fit in any volume (or whose writer must give
    way to older writers when all of them wait for space that nothing can free) is
    returned uncommitted with ``overflow=True``: the caller passes it to the backend.
    With ``divert_when_full`` (and ``allow_overflow``), a body that finds no room (after
    evicting clean data) is diverted the same way instead of waiting: CacheFull if that
    happens before any byte was read, an overflow after; ``wait_for_flushes``: not while
    the flusher can still make room on the volume (see :meth:`SpaceManager.reserve`).
    """
    space = store.space
    vol = space.choose_volume()
    chunk_size = store.settings.chunk_size
    inline_max = store.settings.inline_max_bytes
    claim = space.open_claim(vol)
    try:
        await space.reserve(claim, charge(0), wait=wait, wait_for_flushes=wait_for_flushes,
                            retry_after=retry_after)
    except BaseException as exc:
        space.drop_claim(claim)
        if isinstance(exc, SlowDown):
            if divert_when_full and allow_overflow:
                raise CacheFull() from exc
            store.stats.slowdowns_total += 1
        raise
    out = Spooled(vol, claim)
    # Chunks received and not written yet (``buffered`` bytes): written as they came, by
    # one pwritev, never joined into a buffer.
    buffer: list[bytes] = []
    buffered = 0
    # One write in flight while the next chunk is received (write-behind, bounded).
    pending: asyncio.Future[None] | None = None

    scheduled = 0  # bytes handed to writes, in flight or done (writer.size lags)

    def take() -> list[bytes]:
        nonlocal buffer, buffered
        data, buffer, buffered = buffer, [], 0
        return data

    async def write(data: list[bytes]) -> None:
        nonlocal pending, scheduled
        if pending is not None:
            await pending
        size = sum(len(piece) for piece in data)
        if vol.limiter is not None:  # the volume's bandwidth cap (elastic volumes)
            await vol.limiter.acquire(size)
        scheduled += size
        if out.writer is None:  # the file starts with its first data (one thread hop)
            await _create(out, functools.partial(DataFileWriter, vol, sync=store.sync,
                                                 data=data,
                                                 direct=store.settings.direct_io))
        else:
            pending = asyncio.ensure_future(run_cache_blocking(out.writer.write, data))

    async def drained() -> None:
        nonlocal pending
        if pending is not None:
            job, pending = pending, None
            await job

    try:
        iterator = aiter(body)
        async for chunk in iterator:
            if not chunk:
                continue
            out.consumed += len(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
            overflow = allow_overflow and charge(scheduled + buffered + len(chunk)) \
                > vol.capacity
            if not overflow:
                try:
                    await space.reserve(claim, len(chunk), wait=wait,
                                        wait_for_flushes=wait_for_flushes,
                                        retry_after=retry_after)
                except SlowDown:
                    # Chosen to yield space to older writers: divert rather than fail.
                    if not (allow_overflow and (claim.give_up or divert_when_full)):
                        store.stats.slowdowns_total += 1
                        raise
                    overflow = True
            if overflow:
                if buffer:
                    await write(take())
                await drained()
                out.overflow = True
                out.rest = _prepend(chunk, iterator)
                return out
            if type(chunk) is not bytes:  # held until written: no buffer its producer reuses
                chunk = bytes(chunk)
            buffer.append(chunk)
            buffered += len(chunk)
            # While the body may still be inline, nothing is written.
            if buffered >= chunk_size and (out.writer is not None or buffered > inline_max):
                await write(take())
        if out.writer is None and buffered <= inline_max and inline_room(
                store.index.inline, buffered, space.capacity):
            await _keep_inline(store, out, b"".join(take()), content_md5)
            return out
        if vol.limiter is not None and buffer:
            await vol.limiter.acquire(buffered)
        await drained()
        if out.writer is None:  # a small body: create, write, check, commit in one hop
            await _create(out, functools.partial(DataFileWriter.whole, vol, b"".join(take()),
                                                 sync=store.sync, content_md5=content_md5))
        else:
            await run_cache_blocking(out.writer.finish, take(), content_md5=content_md5)
    except BaseException as exc:
        if pending is not None:
            await asyncio.wait([pending])  # the file is not closed under a running write
        await out.discard(store)
        if isinstance(exc, SlowDown) and out_of_space(exc):
            device_full(vol)  # later writes evict clean data or go to the backend
        raise
    return out


async def _create(out: Spooled, make: Callable[[], DataFileWriter]) -> None:
    """Run ``make`` (which creates the file) in a worker thread and keep its writer in
    ``out`` even if this task is cancelled meanwhile, so that the failure path removes
    the file."""
    job = asyncio.ensure_future(run_cache_blocking(make))
    try:
        await asyncio.shield(job)
    finally:
        if not job.done():
            await asyncio.wait([job])
        if not job.cancelled() and job.exception() is None:
            out.writer = job.result()


async def _keep_inline(store: CacheStore, out: Spooled, data: bytes,
                       content_md5: bytes | None) -> None:
    """Hash ``data`` (on the loop when it is small) and keep it for an inline segment."""
    if len(data) <= HASH_ON_LOOP_BYTES:
        digest = hashlib.md5(data).digest()
    else:
        digest = await run_cache_blocking(lambda: hashlib.md5(data).digest())
    if content_md5 is not None and not hmac.compare_digest(digest, content_md5):
        raise BadDigest()
    out.inline = InlinePayload(data, store.index.inline)
    out.inline_md5 = digest.hex()
    out.inline_name = uuid.uuid4().hex


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for chunk in rest:
        yield chunk


def overflow_body(store: CacheStore, spooled: Spooled, body: DescribedBody) -> Relay:
    """The spooled bytes of ``body`` read back from the temp file, then the rest of it,
    with its facts. The spooled file's space is released as soon as it has been read."""
    return Relay(_overflow_chunks(store, spooled), body.facts)


async def _overflow_chunks(store: CacheStore, spooled: Spooled) -> AsyncIterator[bytes]:
    chunk_size = store.settings.chunk_size
    if spooled.writer is not None:
        path = spooled.writer.tmp_path
        f = await run_cache_blocking(open, path, "rb")
        try:
            await run_cache_blocking(f.seek, charge(0))
            while data := await run_cache_blocking(f.read, chunk_size):
                yield data
        finally:
            with contextlib.suppress(OSError):
                await run_cache_blocking(f.close)
    await spooled.discard(store)
    assert spooled.rest is not None
    async for chunk in spooled.rest:
        yield chunk
