"""Read-through: stream a backend object to the client while keeping a CLEAN copy."""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

from backends.core.base import ObjectInfo, ObjectStream
from backends.core.blocking import run_cache_blocking
from backends.core.errors import SlowDown, StorageError
from backends.core.streams import ClosingBody, CountingBody
from gateway.cache.entry import Entry, EntryState, Segment
from gateway.cache.inline import InlinePayload, inline_room
from gateway.cache.services import ReadThroughHost
from gateway.cache.space import Claim
from gateway.cache.store import CacheStore, Fill
from gateway.cache.volumes import DataFileWriter, charge, unlink

log = logging.getLogger(__name__)


async def read_through(tier: ReadThroughHost, stream: ObjectStream, *,
                       whole: bool) -> ObjectStream:
    """Wrap ``stream`` (from the backend) so that a complete read also caches the object.

    The copy is kept only for whole-object reads that fit without waiting (clean data
    may be evicted for it), whose bytes match the backend's ETag when it is an MD5, and
    when the key was not written meanwhile. A client that stops early abandons the copy
    and its space.
    """
    store = tier.store
    space = store.space
    info = stream.info
    bk = (info.bucket, info.key)
    stats = store.stats

    def count(n: int) -> None:
        stats.backend_client_bytes_total += n

    def counted() -> CountingBody:
        return CountingBody(aiter(stream), count)

    if not whole or info.size > space.max_object or tier.write_around:
        return ObjectStream(info, ClosingBody(counted(), lambda _d: stream.aclose()),
                            stream.byte_range)
    vol = space.choose_volume()
    claim = space.open_claim(vol)
    try:
        await space.reserve(claim, charge(info.size), wait=False)
    except SlowDown:
        space.drop_claim(claim)
        return ObjectStream(info, ClosingBody(counted(), lambda _d: stream.aclose()),
                            stream.byte_range)
    fill = store.register_fill(bk)
    if info.size <= store.settings.inline_max_bytes and inline_room(
            store.index.inline, info.size, space.capacity):
        return _inline_copy(store, stream, counted(), vol.id, claim, fill)
    writer: DataFileWriter | None = None
    try:
        writer = await run_cache_blocking(DataFileWriter, vol, sync=store.sync,
                                          direct=store.settings.direct_io)
    except StorageError:
        log.warning("cannot start a read-through copy of %s/%s", *bk, exc_info=True)
    state = {"broken": writer is None}

    async def tee() -> AsyncIterator[bytes]:
        async for chunk in counted():
            if not state["broken"] and writer is not None:
                try:
                    await run_cache_blocking(writer.write, (chunk,))
                except StorageError:
                    log.warning("read-through copy of %s/%s failed", *bk, exc_info=True)
                    state["broken"] = True
            yield chunk

    async def keep() -> bool:
        if writer is None or state["broken"]:
            return False
        return await _commit_copy(store, info, Segment(
            vol.id, writer.name, writer.size, writer.md5()), fill, writer)

    async def discard() -> None:
        if writer is not None:
            await run_cache_blocking(writer.abort)

    return ObjectStream(info, ClosingBody(tee(), _finisher(store, stream, fill, claim, keep,
                                                           discard)), stream.byte_range)


def _inline_copy(store: CacheStore, stream: ObjectStream, body: AsyncIterator[bytes],
                 vol_id: str, claim: Claim, fill: Fill) -> ObjectStream:
    """``stream`` whose bytes are kept in memory and, once read whole, in an inline
    record (as a small PUT is): no data file, no worker thread, a hit served from memory."""
    info = stream.info
    buffer = bytearray()

    async def tee() -> AsyncIterator[bytes]:
        async for chunk in body:
            buffer.extend(chunk)
            yield chunk

    async def keep() -> bool:
        if len(buffer) != info.size:
            return False
        data = bytes(buffer)
        md5 = hashlib.md5(data).hexdigest()  # at most inline_max_bytes
        segment = Segment(vol_id, uuid.uuid4().hex, len(data), md5,
                          inline=InlinePayload(data, store.index.inline))
        return await _commit_copy(store, info, segment, fill)

    return ObjectStream(info, ClosingBody(tee(), _finisher(store, stream, fill, claim, keep)),
                        stream.byte_range)


def _finisher(store: CacheStore, stream: ObjectStream, fill: Fill, claim: Claim,
              keep: Callable[[], Awaitable[bool]],
              discard: Callable[[], Awaitable[None]] | None = None
              ) -> Callable[[bool], Awaitable[None]]:
    """What runs when a copied stream closes: the backend stream is closed, and a copy
    read whole is kept (``keep``) or dropped (``discard``), its space settled either way."""
    info = stream.info

    async def finish(done: bool) -> None:
        try:
            await stream.aclose()
        finally:
            store.unregister_fill((info.bucket, info.key), fill)
            kept = False
            try:
                kept = done and await keep()
            except StorageError:
                log.warning("read-through copy of %s/%s not kept", info.bucket, info.key,
                            exc_info=True)
            finally:
                if not kept and discard is not None:
                    await discard()
                _account(store, claim, kept)
    return finish


def _account(store: CacheStore, claim: Claim, kept: bool) -> None:
    """A copy's space goes to its record if it was kept, back to the volume if not."""
    if kept:
        store.space.settle(claim)
        store.stats.read_copies_total += 1
    else:
        store.space.drop_claim(claim)


def _matches(info: ObjectInfo, segment: Segment) -> bool:
    """Whether the copied bytes have the backend's ETag (when it is their MD5)."""
    if "-" not in info.etag and segment.md5 != info.etag:
        log.warning("backend bytes of %s/%s do not match its ETag; not cached",
                    info.bucket, info.key)
        return False
    return True


async def _commit_copy(store: CacheStore, info: ObjectInfo, segment: Segment, fill: Fill,
                       writer: DataFileWriter | None = None) -> bool:
    """Record ``segment`` (its file committed first, if ``writer``) as the CLEAN copy of
    the object, unless the key was written meanwhile or its bytes are not the object's."""
    if segment.size != info.size or fill.stale or not _matches(info, segment):
        return False
    bk = (info.bucket, info.key)
    if store.get(*bk) is not None or not store.keys.try_acquire(bk):
        return False
    try:
        if writer is not None:
            await run_cache_blocking(writer.commit)
        entry = Entry(bucket=info.bucket, key=info.key, state=EntryState.CLEAN,
                      seq=store.next_seq(), size=info.size, etag=info.etag, meta=info.meta,
                      segments=(segment,), last_modified=info.last_modified)
        try:
            await store.commit(bk, entry, sync=False)
        except Exception:
            if writer is not None:
                await run_cache_blocking(unlink, store.space.volumes[segment.volume],
                                         writer.name)
            raise
        return True
    finally:
        store.keys.release(bk)
