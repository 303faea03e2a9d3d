"""Multipart uploads held in the cache: parts are data files, completion is an index
operation (the object record references the part files; no data is copied).

A part that does not go to the cache (the tier sends writes of its size past the cache,
or the cache is full) goes to a multipart upload on the inner backend that belongs to the
cached upload (:mod:`gateway.cache.backend_parts`), so an upload of any size succeeds.
Completing with such parts completes on the backend; with cached parts only, it stays an
index operation.

Uploads created while the writeback is in phase 2 take the cache while it has room for
at least a part beyond what it holds unflushed; otherwise they are created on the inner
backend and every later call for them is delegated there (an id the cache does not know
is the backend's business).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from backends.core.base import (
    Backend,
    CompletedPart,
    DescribedBody,
    MultipartBackend,
    ObjectInfo,
    ObjectMeta,
    PartCopyingBackend,
    PartInfo,
    RangeRequest,
    UploadInfo,
    bare,
)
from backends.core.errors import InvalidPart, NoSuchUpload, PreconditionFailed
from backends.core.upload_checksums import part_checksum
from backends.multipart import (
    MAX_PART_NUMBER,
    check_completion,
    completed_meta,
    multipart_etag,
)
from gateway.cache.backend_parts import BackendParts, ForwardedBody
from gateway.cache.entry import Entry, EntryState, Part, Upload
from gateway.cache.index import Batch
from gateway.cache.listing import merge_sorted
from gateway.cache.services import UploadWrites
from gateway.cache.spool import Spooled, overflow_body, spool
from gateway.cache.store import CacheStore


def _check_part_number(part_number: int) -> None:
    if not 1 <= part_number <= MAX_PART_NUMBER:
        raise InvalidPart(f"Part number must be an integer between 1 and "
                          f"{MAX_PART_NUMBER}, inclusive.")


class CachedUploads:
    """The multipart operations of the tier (``tier``) over ``inner``, held in ``store``."""

    def __init__(self, tier: UploadWrites, inner: Backend, store: CacheStore,
                 min_part_size: int) -> None:
        self._tier = tier
        self._inner = inner
        self._store = store
        self._min_part_size = min_part_size
        #: parts held on the backend (None: the inner backend has no multipart uploads)
        self._backend = BackendParts(tier, inner, store) \
            if isinstance(inner, MultipartBackend) else None

    def _native(self) -> MultipartBackend | None:
        return self._inner if isinstance(self._inner, MultipartBackend) else None

    def _mine(self, bucket: str, key: str, upload_id: str) -> Upload | None:
        """The cached upload, None if it is the backend's; NoSuchUpload if nobody's."""
        upload = self._store.upload(upload_id)
        if upload is not None:
            if (upload.bucket, upload.key) != (bucket, key):
                raise NoSuchUpload(upload_id)
            return upload
        if self._native() is None:
            raise NoSuchUpload(upload_id)
        return None

    async def _ready(self) -> None:
        if self._backend is not None:
            await self._backend.ready()

    async def create(self, bucket: str, key: str, meta: ObjectMeta) -> UploadInfo:
        native = self._native()
        await self._tier.admit(self._min_part_size)  # a multipart upload is a large write
        if self._tier.write_around and native is not None and not self._room_for_upload():
            return await native.create_multipart_upload(bucket, key, meta=meta)
        upload = Upload(upload_id=uuid.uuid4().hex, bucket=bucket, key=key,
                        initiated=self._store.now(), meta=meta)
        store = self._store

        async def run() -> None:
            await store.index.commit(Batch().put_upload(upload), sync=store.sync)
            store.add_upload(upload)
        await self._tier.shielded(run())
        return upload.info()

    def _room_for_upload(self) -> bool:
        """Whether a new upload takes the cache although new writes go past it (phase 2):
        while the volumes taking writes hold at least a part's worth beyond unflushed
        records and cached parts. An upload begun as the previous burst drains (the next
        checkpoint) starts a burst of its own: sent to the backend, every part of it would
        run at the store's speed; its ingest ends phase 2."""
        return self._tier.unflushed_room() >= max(self._min_part_size, 1)

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, content_md5: bytes | None) -> PartInfo:
        upload = self._mine(bucket, key, upload_id)
        if upload is None:
            native = self._native()
            assert native is not None
            return await native.upload_part(bucket, key, upload_id, part_number,
                                            ForwardedBody(body, self._store),
                                            content_md5=content_md5)
        _check_part_number(part_number)
        tier, store, remote = self._tier, self._store, self._backend
        if remote is None:  # the cache is the only place a part can go
            if not store.space.volumes:  # the elastic volume was detached since it began
                await tier.admit(None, require=True)
            spooled = await spool(store, body, content_md5=content_md5,
                                  on_bytes=tier.count_ingest, retry_after=tier.retry_after)
            return await self._cache_part(upload, part_number, spooled, body, None)
        await remote.ready()
        declared = body.facts.declared_length
        await tier.admit(declared)
        with tier.admission.writing(declared):
            past = tier.bypass_cache(declared, part=True,
                                     parts_cached=bool(store.parts_of(upload_id)),
                                     parts_past=bool(remote.of(upload_id))) \
                or not store.space.volumes
            tier.admission.count(past)
            if past:
                return await remote.send_body(upload, part_number, body, content_md5,
                                              measure=True)
            started = asyncio.get_running_loop().time()
            admitted = await tier.spool_admitted(
                body, content_md5, wait_for_room=tier.waits_for_room(declared))
            if admitted is None:  # the cache is full: the part goes to the backend
                return await remote.send_body(upload, part_number, body, content_md5,
                                              diverted=True)
            spooled = admitted
            if spooled.overflow:
                try:
                    store.stats.ingest_bytes_total -= spooled.consumed  # counted again on the way
                    return await remote.send_body(upload, part_number,
                                                  overflow_body(store, spooled, body),
                                                  content_md5, close=True, diverted=True)
                finally:
                    await spooled.discard(store)
            return await self._cache_part(upload, part_number, spooled, body, started)

    async def _cache_part(self, upload: Upload, part_number: int, spooled: Spooled,
                          body: DescribedBody, started: float | None) -> PartInfo:
        """Record a spooled part, replacing a part of that number wherever it lived."""
        tier, store, remote = self._tier, self._store, self._backend
        upload_id = upload.upload_id
        try:
            checksum = part_checksum(upload.meta, body)
        except BaseException:
            await spooled.discard(store)
            raise
        segment = replace(spooled.segment, checksum=checksum)
        part = Part(part_number=part_number, etag=segment.md5, size=segment.size,
                    last_modified=store.now(), segment=segment, checksum=checksum)

        async def commit() -> PartInfo:
            try:
                async with store.keys.hold(("upload", upload_id)):
                    if store.upload(upload_id) is None:
                        raise NoSuchUpload(upload_id)
                    batch = Batch().put_part(upload_id, part)
                    on_backend = remote is not None and part_number in remote.of(upload_id)
                    if on_backend:
                        batch.delete_backend_parts(upload_id, [part_number])
                    await store.index.commit(batch, sync=store.sync)
                    old = store.record_part(upload_id, part)
                    if remote is not None and on_backend:
                        remote.drop(upload_id, part_number)
                    spooled.settle(store)
            except BaseException:
                await spooled.discard(store)
                raise
            if old is not None:
                await store.space.discard([old.segment])
            if started is not None:
                tier.admission.observe_cache(
                    part.size, asyncio.get_running_loop().time() - started, store.now())
            return part.info()
        return await tier.shielded(commit())

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, part_number: int,
                               byte_range: RangeRequest | None,
                               src_etag: str | None) -> PartInfo:
        """A part copied from (a range of) the current source. A source with no unflushed
        record is copied by the backend itself when the part goes there; otherwise the
        bytes are read through the cache (a dirty source is only there)."""
        upload = self._mine(bucket, key, upload_id)
        tier, store = self._tier, self._store
        source = store.get(src_bucket, src_key)
        copier = self._inner if isinstance(self._inner, PartCopyingBackend) else None
        if copier is not None and (source is None or not source.dirty):
            if upload is None:  # the backend's own upload
                return await copier.upload_part_copy(
                    src_bucket, src_key, bucket, key, upload_id, part_number,
                    byte_range=byte_range, src_etag=src_etag)
            _check_part_number(part_number)
            if self._backend is not None:
                size = source.size if source is not None else \
                    (await self._inner.head_object(src_bucket, src_key)).size
                length = byte_range.resolve(size).length if byte_range is not None else size
                if tier.bypass_cache(length) or not store.space.volumes:
                    await self._backend.ready()
                    return await self._backend.copy_part(upload, part_number, copier,
                                                         src_bucket, src_key, byte_range,
                                                         src_etag)
        stream = await tier.get_object(src_bucket, src_key, byte_range=byte_range)
        async with stream:
            if src_etag is not None and stream.info.etag != src_etag.strip('"'):
                raise PreconditionFailed()
            return await self.upload_part(bucket, key, upload_id, part_number,
                                          bare(aiter(stream),
                                               declared_length=stream.content_length),
                                          None)

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        upload = self._mine(bucket, key, upload_id)
        if upload is None:
            native = self._native()
            assert native is not None
            return await native.list_parts(bucket, key, upload_id)
        await self._ready()
        return sorted(self._infos(upload_id), key=lambda p: p.part_number)

    def _infos(self, upload_id: str) -> list[PartInfo]:
        """Every part of a cached upload, cached or on the backend (unordered)."""
        infos = [p.info() for p in self._store.parts_of(upload_id).values()]
        if self._backend is not None:
            infos.extend(p.info() for p in self._backend.of(upload_id).values())
        return infos

    def _removal(self, upload: Upload) -> Batch:
        """The index changes removing ``upload`` and all its part records."""
        upload_id = upload.upload_id
        batch = Batch().delete_upload(upload_id, list(self._store.parts_of(upload_id)))
        if self._backend is not None:
            batch.delete_backend_parts(upload_id, list(self._backend.of(upload_id)))
        return batch

    def _forget(self, upload: Upload) -> dict[int, Part]:
        """Forget ``upload`` (its removal is written); returns its cached parts, whose
        files the caller discards."""
        if self._backend is not None:
            self._backend.forget(upload.upload_id, upload.backend_upload_id)
        return self._store.drop_upload(upload.upload_id)

    async def complete(self, bucket: str, key: str, upload_id: str,
                       requested: Sequence[CompletedPart], if_match: str | None,
                       if_none_match: str | None) -> ObjectInfo:
        upload = self._mine(bucket, key, upload_id)
        bk = (bucket, key)
        tier, store = self._tier, self._store
        if upload is None:
            native = self._native()
            assert native is not None
            await tier.acquire_clean(bk)
            try:
                await tier.invalidate(bk)
                info = await native.complete_multipart_upload(
                    bucket, key, upload_id, requested, if_match=if_match,
                    if_none_match=if_none_match)
                store.invalidate_fills(bk)
                return info
            finally:
                store.keys.release(bk)
        await self._ready()

        async def run() -> ObjectInfo:
            async with store.keys.hold(("upload", upload_id)):
                current = store.upload(upload_id)
                if current is None:
                    raise NoSuchUpload(upload_id)
                chosen = check_completion(requested, self._infos(upload_id),
                                          min_part_size=self._min_part_size)
                parts = store.parts_of(upload_id)
                if any(p.part_number not in parts for p in chosen):
                    assert self._backend is not None
                    info = await self._backend.complete(current, chosen, if_match,
                                                        if_none_match)
                    await store.index.commit(self._removal(current),
                                       sync=store.sync)
                    leftover = self._forget(current)
                    await store.space.discard([p.segment for p in leftover.values()])
                    return info
                return await self._complete_cached(current, chosen, if_match, if_none_match)
        return await tier.shielded(run())

    async def _complete_cached(self, upload: Upload, chosen: list[PartInfo],
                               if_match: str | None, if_none_match: str | None) -> ObjectInfo:
        """Every chosen part is cached: the object record references their files. A backend
        upload the upload may have is aborted (recorded first, so a crash cannot leak it)."""
        tier, store = self._tier, self._store
        bk = (upload.bucket, upload.key)
        orphan = upload.backend_upload_id
        async with store.keys.hold(bk):
            await tier.check_preconditions(bk, if_match, if_none_match)
            parts = store.parts_of(upload.upload_id)
            segments = tuple(parts[p.part_number].segment for p in chosen)
            now = store.now()
            entry = Entry(bucket=upload.bucket, key=upload.key, state=EntryState.DIRTY,
                          seq=store.next_seq(), size=sum(s.size for s in segments),
                          etag=multipart_etag(chosen),
                          meta=completed_meta(upload.meta, chosen, upload.upload_id),
                          segments=segments, last_modified=now, dirty_since=now)
            batch = self._removal(upload)
            if orphan is not None:
                batch.put_flush_upload(orphan, *bk)
            await store.commit(bk, entry, sync=store.sync, batch=batch)
            if orphan is not None:
                store.add_flush_upload(orphan, bk)
            leftover = self._forget(upload)
            await store.space.discard([p.segment for p in leftover.values()
                                 if p.segment not in segments])
        if orphan is not None and self._backend is not None:
            await self._backend.abort_orphan(bk, orphan)
        return entry.info()

    async def abort(self, bucket: str, key: str, upload_id: str) -> None:
        upload = self._mine(bucket, key, upload_id)
        if upload is None:
            native = self._native()
            assert native is not None
            await native.abort_multipart_upload(bucket, key, upload_id)
            return
        await self._ready()
        store = self._store

        async def run() -> None:
            async with store.keys.hold(("upload", upload_id)):
                current = store.upload(upload_id)
                if current is None:
                    raise NoSuchUpload(upload_id)
                bk = (bucket, key)
                orphan = current.backend_upload_id
                batch = self._removal(current)
                if orphan is not None:  # aborted below; by the flusher's start after a crash
                    batch.put_flush_upload(orphan, bucket, key)
                await store.index.commit(batch, sync=store.sync)
                if orphan is not None:
                    store.add_flush_upload(orphan, bk)
                parts = self._forget(current)
                await store.space.discard([p.segment for p in parts.values()])
            if orphan is not None and self._backend is not None:
                await self._backend.abort_orphan(bk, orphan)
        await self._tier.shielded(run())

    async def iter_uploads(self, bucket: str, prefix: str) -> AsyncIterator[UploadInfo]:
        await self._ready()
        mine = sorted(((u.key, u.initiated, u.upload_id), u.info())
                      for u in self._store.uploads_in(bucket, prefix))
        native = self._native()
        inner: AsyncIterator[UploadInfo] = (
            native.iter_multipart_uploads(bucket, prefix=prefix) if native is not None
            else _empty())
        store, remote = self._store, self._backend
        async for info in merge_sorted(mine, inner,
                                       lambda u: (u.key, u.initiated, u.upload_id)):
            # Backend uploads of the flusher and of cached uploads are hidden (by key
            # while being created).
            if store.is_flush_upload(info.upload_id) or (
                    remote is not None and remote.hides(info.upload_id)):
                continue
            if store.upload(info.upload_id) is not None \
                    or not store.creating_upload((info.bucket, info.key)):
                yield info


async def _empty() -> AsyncIterator[UploadInfo]:
    return
    yield  # pragma: no cover
