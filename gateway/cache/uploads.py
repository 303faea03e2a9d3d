"""Multipart uploads held in the cache: parts are data files, completion is an index
operation (the object record references the part files; no data is copied).

Uploads created while the writeback is in phase 2 are created on the inner backend and
every later call for them is delegated there (an id the cache does not know is the
backend's business).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from backends.base import (
    Backend,
    CompletedPart,
    MultipartBackend,
    ObjectInfo,
    ObjectMeta,
    PartInfo,
    UploadInfo,
)
from backends.blocking import run_blocking
from backends.errors import InvalidPart, NoSuchUpload
from backends.multipart import (
    MAX_PART_NUMBER,
    check_completion,
    composite_checksum,
    multipart_etag,
)
from gateway.cache.entry import Entry, EntryState, Part, Upload
from gateway.cache.index import Batch
from gateway.cache.listing import merge_sorted
from gateway.cache.spool import spool
from gateway.cache.store import CacheStore

if TYPE_CHECKING:
    from gateway.cache.tier import CacheTier


class CachedUploads:
    def __init__(self, tier: CacheTier, inner: Backend, store: CacheStore,
                 min_part_size: int) -> None:
        self._tier = tier
        self._inner = inner
        self._store = store
        self._min_part_size = min_part_size

    def _native(self) -> MultipartBackend | None:
        return self._inner if isinstance(self._inner, MultipartBackend) else None

    def _mine(self, bucket: str, key: str, upload_id: str) -> Upload | None:
        """The cached upload, None if it is the backend's; NoSuchUpload if nobody's."""
        upload = self._store.uploads.get(upload_id)
        if upload is not None:
            if (upload.bucket, upload.key) != (bucket, key):
                raise NoSuchUpload(upload_id)
            return upload
        if self._native() is None:
            raise NoSuchUpload(upload_id)
        return None

    async def create(self, bucket: str, key: str, meta: ObjectMeta) -> UploadInfo:
        native = self._native()
        await self._tier.admit(self._min_part_size)  # a multipart upload is a large write
        if self._tier.write_around and native is not None:
            return await native.create_multipart_upload(bucket, key, meta=meta)
        upload = Upload(upload_id=uuid.uuid4().hex, bucket=bucket, key=key,
                        initiated=self._store.now(), meta=meta)
        store = self._store

        async def run() -> None:
            await run_blocking(store.index.write, Batch().put_upload(upload), sync=store.sync)
            store.uploads[upload.upload_id] = upload
            store.parts[upload.upload_id] = {}
        await self._tier.shielded(run())
        return upload.info()

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: AsyncIterator[bytes], content_md5: bytes | None) -> PartInfo:
        upload = self._mine(bucket, key, upload_id)
        if upload is None:
            native = self._native()
            assert native is not None
            return await native.upload_part(bucket, key, upload_id, part_number, body,
                                            content_md5=content_md5)
        if not 1 <= part_number <= MAX_PART_NUMBER:
            raise InvalidPart(f"Part number must be an integer between 1 and "
                              f"{MAX_PART_NUMBER}, inclusive.")
        store = self._store
        if not store.volumes:  # the elastic volume was detached since the upload began
            await self._tier.admit(None, require=True)
        spooled = await spool(store, body, content_md5=content_md5,
                              on_bytes=self._tier.count_ingest,
                              retry_after=self._tier.retry_after)
        checksum = getattr(body, "checksum", None)
        segment = replace(spooled.segment, checksum=checksum)
        part = Part(part_number=part_number, etag=segment.md5, size=segment.size,
                    last_modified=store.now(), segment=segment, checksum=checksum)

        async def commit() -> PartInfo:
            try:
                async with store.keys.hold(("upload", upload_id)):
                    if upload_id not in store.uploads:
                        raise NoSuchUpload(upload_id)
                    await run_blocking(store.index.write, Batch().put_part(upload_id, part),
                                       sync=store.sync)
                    old = store.parts[upload_id].get(part_number)
                    store.parts[upload_id][part_number] = part
                    spooled.settle(store)
            except BaseException:
                await spooled.discard(store)
                raise
            if old is not None:
                await store.discard([old.segment])
            return part.info()
        return await self._tier.shielded(commit())

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        upload = self._mine(bucket, key, upload_id)
        if upload is None:
            native = self._native()
            assert native is not None
            return await native.list_parts(bucket, key, upload_id)
        parts = self._store.parts.get(upload_id, {})
        return [parts[n].info() for n in sorted(parts)]

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

        async def run() -> ObjectInfo:
            async with store.keys.hold(("upload", upload_id)), store.keys.hold(bk):
                if upload_id not in store.uploads:
                    raise NoSuchUpload(upload_id)
                parts = store.parts[upload_id]
                chosen = check_completion(requested, [p.info() for p in parts.values()],
                                          min_part_size=self._min_part_size)
                await tier.check_preconditions(bk, if_match, if_none_match)
                segments = tuple(parts[p.part_number].segment for p in chosen)
                now = store.now()
                entry = Entry(bucket=bucket, key=key, state=EntryState.DIRTY,
                              seq=store.next_seq(), size=sum(s.size for s in segments),
                              etag=multipart_etag(chosen),
                              meta=replace(upload.meta, checksum=composite_checksum(chosen)),
                              segments=segments, last_modified=now, dirty_since=now)
                batch = Batch().delete_upload(upload_id, list(parts))
                await store.commit(bk, entry, sync=store.sync, batch=batch)
                del store.uploads[upload_id]
                leftover = store.parts.pop(upload_id)
                await store.discard([p.segment for p in leftover.values()
                                     if p.segment not in segments])
                return entry.info()
        return await tier.shielded(run())

    async def abort(self, bucket: str, key: str, upload_id: str) -> None:
        upload = self._mine(bucket, key, upload_id)
        if upload is None:
            native = self._native()
            assert native is not None
            await native.abort_multipart_upload(bucket, key, upload_id)
            return
        store = self._store

        async def run() -> None:
            async with store.keys.hold(("upload", upload_id)):
                if upload_id not in store.uploads:
                    raise NoSuchUpload(upload_id)
                parts = store.parts[upload_id]
                await run_blocking(store.index.write,
                                   Batch().delete_upload(upload_id, list(parts)),
                                   sync=store.sync)
                del store.uploads[upload_id]
                store.parts.pop(upload_id)
                await store.discard([p.segment for p in parts.values()])
        await self._tier.shielded(run())

    async def iter_uploads(self, bucket: str, prefix: str) -> AsyncIterator[UploadInfo]:
        mine = sorted(((u.key, u.initiated, u.upload_id), u.info())
                      for u in list(self._store.uploads.values())
                      if u.bucket == bucket and u.key.startswith(prefix))
        native = self._native()
        inner: AsyncIterator[UploadInfo] = (
            native.iter_multipart_uploads(bucket, prefix=prefix) if native is not None
            else _empty())
        store = self._store
        async for info in merge_sorted(mine, inner,
                                       lambda u: (u.key, u.initiated, u.upload_id)):
            # The flusher's own backend uploads are hidden (by key while being created).
            if info.upload_id not in store.flush_uploads and (
                    info.upload_id in store.uploads
                    or (info.bucket, info.key) not in store.flush_creating):
                yield info


async def _empty() -> AsyncIterator[UploadInfo]:
    return
    yield  # pragma: no cover
