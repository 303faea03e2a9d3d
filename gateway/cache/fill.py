"""Read-through: stream a backend object to the client while keeping a CLEAN copy."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from backends.base import ObjectInfo, ObjectStream
from backends.blocking import run_cache_blocking
from backends.errors import SlowDown, StorageError
from gateway.cache.entry import Entry, EntryState, Segment
from gateway.cache.services import ReadThroughHost
from gateway.cache.store import CacheStore, Fill
from gateway.cache.streams import ClosingBody, CountingBody
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
    writer: DataFileWriter | None = None
    try:
        writer = await run_cache_blocking(DataFileWriter, vol, sync=store.sync)
    except StorageError:
        log.warning("cannot start a read-through copy of %s/%s", *bk, exc_info=True)
    state = {"broken": writer is None}

    async def tee() -> AsyncIterator[bytes]:
        async for chunk in counted():
            if not state["broken"] and writer is not None:
                try:
                    await run_cache_blocking(writer.write, chunk)
                except StorageError:
                    log.warning("read-through copy of %s/%s failed", *bk, exc_info=True)
                    state["broken"] = True
            yield chunk

    async def finish(done: bool) -> None:
        try:
            await stream.aclose()
        finally:
            store.unregister_fill(bk, fill)
            kept = False
            try:
                if done and writer is not None and not state["broken"]:
                    kept = await _keep(store, writer, vol.id, info, fill)
            except StorageError:
                log.warning("read-through copy of %s/%s not kept", *bk, exc_info=True)
            finally:
                if kept:
                    space.settle(claim)
                    store.stats.read_copies_total += 1
                else:
                    if writer is not None:
                        await run_cache_blocking(writer.abort)
                    space.drop_claim(claim)

    return ObjectStream(info, ClosingBody(tee(), finish), stream.byte_range)


async def _keep(store: CacheStore, writer: DataFileWriter, vol_id: str, info: ObjectInfo,
                fill: Fill) -> bool:
    if writer.size != info.size or fill.stale:
        return False
    if "-" not in info.etag and writer.md5() != info.etag:
        log.warning("backend bytes of %s/%s do not match its ETag; not cached",
                    info.bucket, info.key)
        return False
    bk = (info.bucket, info.key)
    if store.get(*bk) is not None or not store.keys.try_acquire(bk):
        return False
    try:
        await run_cache_blocking(writer.commit)
        entry = Entry(bucket=info.bucket, key=info.key, state=EntryState.CLEAN,
                      seq=store.next_seq(), size=info.size, etag=info.etag, meta=info.meta,
                      segments=(Segment(vol_id, writer.name, writer.size, writer.md5()),),
                      last_modified=info.last_modified)
        try:
            await store.commit(bk, entry, sync=False)
        except Exception:
            await run_cache_blocking(unlink, store.space.volumes[vol_id], writer.name)
            raise
        return True
    finally:
        store.keys.release(bk)
