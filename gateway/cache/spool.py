"""Writing a request body into a cache data file with incremental space reservation."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from backends.blocking import run_blocking
from backends.errors import BadDigest, SlowDown
from gateway.cache.entry import Segment
from gateway.cache.store import CacheStore, Claim
from gateway.cache.volumes import DataFileWriter, Volume, charge


@dataclass
class Spooled:
    """A body written to a cache file. ``overflow`` means the body turned out larger than
    any volume: ``writer`` is uncommitted and ``rest`` yields what was not yet spooled."""

    volume: Volume
    writer: DataFileWriter
    claim: Claim
    overflow: bool = False
    rest: AsyncIterator[bytes] | None = None
    discarded: bool = False
    consumed: int = 0  # body bytes taken from the iterator (spooled or pending)

    @property
    def segment(self) -> Segment:
        return Segment(self.volume.id, self.writer.name, self.writer.size, self.writer.md5())

    async def discard(self, store: CacheStore) -> None:
        """Drop the file and give its space back (shielded from cancellation; once)."""
        if self.discarded:
            return
        self.discarded = True

        async def run() -> None:
            try:
                await run_blocking(self.writer.abort)
            finally:
                store.drop_claim(self.claim)
        await asyncio.shield(run())

    def settle(self, store: CacheStore) -> None:
        """The file was committed to the index: its space now belongs to it."""
        store.settle(self.claim)


async def spool(store: CacheStore, body: AsyncIterator[bytes], *,
                content_md5: bytes | None = None, wait: bool = True,
                allow_overflow: bool = False,
                on_bytes: Callable[[int], None] | None = None,
                retry_after: Callable[[], float] | None = None) -> Spooled:
    """Consume ``body`` into a new, committed (durable per settings) data file.

    Space is reserved chunk by chunk as data arrives (waiting for room when ``wait``);
    on any failure the file is removed and all its space released. With
    ``allow_overflow``, a body that cannot fit in any volume (or whose writer must give
    way to older writers when all of them wait for space that nothing can free) is
    returned uncommitted with ``overflow=True``: the caller passes it to the backend.
    """
    vol = store.choose_volume()
    chunk_size = store.settings.chunk_size
    claim = store.open_claim(vol)
    try:
        await store.reserve(claim, charge(0), wait=wait, retry_after=retry_after)
        writer = await run_blocking(DataFileWriter, vol, sync=store.sync)
    except BaseException as exc:
        store.drop_claim(claim)
        if isinstance(exc, SlowDown):
            store.stats.slowdowns_total += 1
        raise
    out = Spooled(vol, writer, claim)
    buffer = bytearray()
    # One write in flight while the next chunk is received (write-behind, bounded).
    pending: asyncio.Future[None] | None = None

    scheduled = 0  # bytes handed to writes, in flight or done (writer.size lags)

    async def write(data: bytes) -> None:
        nonlocal pending, scheduled
        if pending is not None:
            await pending
        if vol.limiter is not None:  # the volume's bandwidth cap (elastic volumes)
            await vol.limiter.acquire(len(data))
        scheduled += len(data)
        pending = asyncio.ensure_future(run_blocking(writer.write, data))

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
            overflow = allow_overflow and charge(scheduled + len(buffer) + len(chunk)) \
                > vol.capacity
            if not overflow:
                try:
                    await store.reserve(claim, len(chunk), wait=wait, retry_after=retry_after)
                except SlowDown:
                    # Chosen to yield space to older writers: divert rather than fail.
                    if not (allow_overflow and claim.give_up):
                        store.stats.slowdowns_total += 1
                        raise
                    overflow = True
            if overflow:
                if buffer:
                    await write(bytes(buffer))
                await drained()
                out.overflow = True
                out.rest = _prepend(chunk, iterator)
                return out
            buffer += chunk
            if len(buffer) >= chunk_size:
                data, buffer = bytes(buffer), bytearray()
                await write(data)
        if buffer:
            await write(bytes(buffer))
        await drained()
        if content_md5 is not None and not hmac.compare_digest(
                bytes.fromhex(writer.md5()), content_md5):
            raise BadDigest()
        await run_blocking(writer.commit)
    except BaseException:
        if pending is not None:
            await asyncio.wait([pending])  # the file is not closed under a running write
        await out.discard(store)
        raise
    return out


async def _prepend(first: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield first
    async for chunk in rest:
        yield chunk


async def overflow_body(store: CacheStore, spooled: Spooled) -> AsyncIterator[bytes]:
    """The spooled bytes read back from the temp file, then the rest of the body. The
    spooled file's space is released as soon as it has been read."""
    chunk_size = store.settings.chunk_size
    path = spooled.writer.tmp_path
    await run_blocking(spooled.writer.flush)
    f = await run_blocking(open, path, "rb")
    try:
        await run_blocking(f.seek, charge(0))
        while data := await run_blocking(f.read, chunk_size):
            yield data
    finally:
        with contextlib.suppress(OSError):
            await run_blocking(f.close)
    await spooled.discard(store)
    assert spooled.rest is not None
    async for chunk in spooled.rest:
        yield chunk
