"""Parts of cached multipart uploads that live in a multipart upload on the backend.

A part that does not go to the cache (the admission rule sends it past, or the cache is
full) is sent to a multipart upload on the inner backend, created for its cached upload on
first need. The backend upload's id is recorded in the upload record before any part is
sent there, and each part is recorded (an ``r`` record) once the backend acknowledged it,
so a crash neither leaks nor loses one. Completing with such parts sends the chosen cached
parts into the backend upload and completes it there, past the cache as a write-around
does. See docs/cache.md, "Uploads larger than the cache".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from backends.core.base import (
    CompletedPart,
    DescribedBody,
    MultipartBackend,
    ObjectInfo,
    PartCopyingBackend,
    PartInfo,
    RangeRequest,
    Relay,
)
from backends.core.blocking import run_cache_blocking
from backends.core.errors import (
    BackendError,
    BadDigest,
    NoSuchKey,
    NoSuchUpload,
    ServiceUnavailable,
    SlowDown,
)
from backends.multipart import COMPLETED_UPLOAD, multipart_etag
from gateway.cache.entry import BackendPart, Part, Segment, Upload
from gateway.cache.index import Batch
from gateway.cache.readers import backend_body
from gateway.cache.services import KeyWrites
from gateway.cache.store import BK, CacheStore

log = logging.getLogger(__name__)

#: cached parts sent at once into the backend upload when an upload completes there
_PARALLEL_PARTS = 4
#: backend failures that make the admission rule stop sending writes past the cache
_BACKEND_FAILURES = (SlowDown, ServiceUnavailable, BackendError, OSError)


class ForwardedBody(DescribedBody):
    """A client's part body on its way to the backend: counted as ingest written around
    the cache (``diverted``: because the cache was full)."""

    def __init__(self, body: DescribedBody, store: CacheStore, *,
                 diverted: bool = False) -> None:
        super().__init__(body.facts)
        self._iter = body
        self._stats = store.stats
        self._diverted = diverted

    async def __anext__(self) -> bytes:
        chunk = await self._iter.__anext__()
        stats = self._stats
        stats.backend_client_bytes_total += len(chunk)
        stats.ingest_bytes_total += len(chunk)
        stats.writearound_bytes_total += len(chunk)
        if self._diverted:
            stats.diverted_bytes_total += len(chunk)
        return chunk


class BackendParts:
    """The backend side of the cache's uploads, over ``native`` (the tier's inner backend).

    Holds the backend part records in memory (loaded from the index on first use, see
    :meth:`ready`) and which backend upload belongs to which cached upload. ``tier`` is
    what writing past the cache needs of the tier.
    """

    def __init__(self, tier: KeyWrites, native: MultipartBackend, store: CacheStore) -> None:
        self._tier = tier
        self._native = native
        self._store = store
        self._parts: dict[str, dict[int, BackendPart]] = {}
        self._owners: dict[str, str] = {}  # backend upload id -> cached upload id
        self._loaded = False
        self._loading = asyncio.Lock()

    async def ready(self) -> None:
        """Load the records once, on first use after the store opened the index. Records
        of an upload that is gone (never left behind: they go in its removal batch) are
        dropped."""
        if self._loaded:
            return
        async with self._loading:
            if self._loaded:
                return
            store = self._store
            found = await run_cache_blocking(store.index.backend_parts)
            stale = Batch()
            for upload_id, parts in found.items():
                if store.upload(upload_id) is not None:
                    self._parts[upload_id] = {p.part_number: p for p in parts}
                else:
                    stale.delete_backend_parts(upload_id, [p.part_number for p in parts])
            if stale.deletes:
                await store.index.commit(stale, sync=False)
            for upload in store.uploads_in():
                if upload.backend_upload_id is not None:
                    self._owners[upload.backend_upload_id] = upload.upload_id
            self._loaded = True

    def of(self, upload_id: str) -> dict[int, BackendPart]:
        """The backend parts of a cached upload, by number."""
        return self._parts.get(upload_id, {})

    def hides(self, backend_upload_id: str) -> bool:
        """Whether a backend upload belongs to a cached upload (and is not listed)."""
        return backend_upload_id in self._owners

    def drop(self, upload_id: str, part_number: int) -> None:
        """Forget one part (its record was deleted: a cached part replaced it)."""
        self._parts.get(upload_id, {}).pop(part_number, None)

    def forget(self, upload_id: str, backend_upload_id: str | None) -> None:
        """Forget an upload whose records were deleted."""
        self._parts.pop(upload_id, None)
        if backend_upload_id is not None:
            self._owners.pop(backend_upload_id, None)

    # -- the backend upload ------------------------------------------------------------
    async def backend_upload(self, upload_id: str) -> str:
        """The id of the upload's backend upload, created and recorded on first need."""
        upload = self._store.upload(upload_id)
        if upload is None:
            raise NoSuchUpload(upload_id)
        if upload.backend_upload_id is not None:
            return upload.backend_upload_id
        return await self._tier.shielded(self._create(upload_id))

    async def _create(self, upload_id: str) -> str:
        store = self._store
        async with store.keys.hold(("upload", upload_id, "backend")):
            upload = store.upload(upload_id)
            if upload is None:
                raise NoSuchUpload(upload_id)
            if upload.backend_upload_id is not None:
                return upload.backend_upload_id
            bk = (upload.bucket, upload.key)
            with store.creating_backend_upload(bk):  # hidden before its id is known
                created = await self._native.create_multipart_upload(
                    *bk, meta=replace(upload.meta, user={**upload.meta.user,
                                                         COMPLETED_UPLOAD: upload_id}))
                try:
                    await self._record(upload_id, created.upload_id)
                except BaseException:
                    await self._abort_quietly(bk, created.upload_id)
                    raise
            return created.upload_id

    async def _record(self, upload_id: str, backend_upload_id: str) -> None:
        store = self._store
        async with store.keys.hold(("upload", upload_id)):
            upload = store.upload(upload_id)
            if upload is None:  # aborted meanwhile
                raise NoSuchUpload(upload_id)
            new = replace(upload, backend_upload_id=backend_upload_id)
            await store.index.commit(Batch().put_upload(new), sync=store.sync)
            store.update_upload(new)
            self._owners[backend_upload_id] = upload_id

    async def _abort_quietly(self, bk: BK, backend_upload_id: str) -> None:
        try:
            with contextlib.suppress(NoSuchUpload):
                await self._native.abort_multipart_upload(*bk, backend_upload_id)
        except Exception as exc:  # noqa: BLE001 - the original error matters more
            log.warning("could not abort backend upload %s of %s/%s: %r",
                        backend_upload_id, bk[0], bk[1], exc)

    async def abort_orphan(self, bk: BK, backend_upload_id: str) -> None:
        """Abort a backend upload the caller recorded as an orphan (an ``f`` record, with
        the upload's removal), then forget it. If the backend fails, the record stays and
        the flusher aborts the upload at the next start."""
        store = self._store
        try:
            with contextlib.suppress(NoSuchUpload):
                await self._native.abort_multipart_upload(*bk, backend_upload_id)
            await store.index.commit(Batch().delete_flush_upload(backend_upload_id), sync=False)
            store.drop_flush_upload(backend_upload_id)
        except Exception as exc:  # noqa: BLE001 - retried at the next start
            log.warning("aborting backend upload %s of %s/%s failed (retried at the next "
                        "start): %r", backend_upload_id, bk[0], bk[1], exc)

    # -- parts -------------------------------------------------------------------------
    async def send(self, upload_id: str, part_number: int,
                   send: Callable[[str], Awaitable[PartInfo]],
                   checksum: Callable[[], tuple[str, str] | None] = lambda: None) -> PartInfo:
        """Make a part with ``send(backend upload id)``, then record it, replacing a part
        of that number wherever it lived. Sends of one part number are serialised, so the
        record names what the backend kept."""
        store = self._store
        async with store.keys.hold(("upload", upload_id, part_number)):
            backend_upload_id = await self.backend_upload(upload_id)
            try:
                info = await send(backend_upload_id)
            except NoSuchUpload:  # aborted or completed meanwhile: name the client's id
                raise NoSuchUpload(upload_id) from None
            part = BackendPart(part_number, info.etag, info.size, info.last_modified,
                               checksum() or info.checksum)
            return await self._tier.shielded(self._commit(upload_id, part))

    async def _commit(self, upload_id: str, part: BackendPart) -> PartInfo:
        store = self._store
        async with store.keys.hold(("upload", upload_id)):
            if store.upload(upload_id) is None:
                raise NoSuchUpload(upload_id)
            old = store.parts_of(upload_id).get(part.part_number)
            batch = Batch().put_backend_part(upload_id, part)
            if old is not None:
                batch.delete_parts(upload_id, [part.part_number])
            await store.index.commit(batch, sync=store.sync)
            self._parts.setdefault(upload_id, {})[part.part_number] = part
            if old is not None:
                store.forget_part(upload_id, part.part_number)
        if old is not None:
            await store.space.discard([old.segment])
        return part.info()

    async def send_body(self, upload: Upload, part_number: int, body: DescribedBody,
                        content_md5: bytes | None, *, close: bool = False,
                        measure: bool = False, diverted: bool = False) -> PartInfo:
        """Stream a client's part into the backend upload (``close``: ``body`` is the
        caller's re-reading of it, closed here). ``measure`` feeds the backend rate of
        the admission rule (a part it routed past the cache)."""
        tier = self._tier
        forwarded = ForwardedBody(body, self._store, diverted=diverted)
        loop = asyncio.get_running_loop()
        started = loop.time()

        async def send(backend_upload_id: str) -> PartInfo:
            try:
                return await self._native.upload_part(
                    upload.bucket, upload.key, backend_upload_id, part_number, forwarded,
                    content_md5=content_md5)
            except _BACKEND_FAILURES:
                tier.admission.backend_failed()
                raise

        try:
            info = await self.send(upload.upload_id, part_number, send,
                                   lambda: forwarded.facts.checksum)
        finally:
            if close:
                await body.aclose()
        if measure:
            tier.admission.observe_backend(info.size, loop.time() - started,
                                           self._store.now())
        return info

    async def copy_part(self, upload: Upload, part_number: int, copier: PartCopyingBackend,
                        src_bucket: str, src_key: str, byte_range: RangeRequest | None,
                        src_etag: str | None) -> PartInfo:
        """A server-side part copy on the backend, into the backend upload."""
        async def send(backend_upload_id: str) -> PartInfo:
            return await copier.upload_part_copy(
                src_bucket, src_key, upload.bucket, upload.key, backend_upload_id,
                part_number, byte_range=byte_range, src_etag=src_etag)
        return await self.send(upload.upload_id, part_number, send)

    # -- completion --------------------------------------------------------------------
    async def complete(self, upload: Upload, chosen: Sequence[PartInfo],
                       if_match: str | None, if_none_match: str | None) -> ObjectInfo:
        """Complete ``upload`` on the backend; the caller holds the upload's lock and chose
        the parts (:func:`check_completion`). The chosen cached parts are sent into the
        backend upload first; then, as for every write past the cache, the key waits until
        no older version is unflushed, its clean record is dropped, and the backend
        completes (checking the conditions)."""
        store, tier = self._store, self._tier
        bk = (upload.bucket, upload.key)
        backend_upload_id = upload.backend_upload_id
        assert backend_upload_id is not None
        async with store.keys.hold(bk):  # fail early; the backend checks them atomically
            await tier.check_preconditions(bk, if_match, if_none_match)
        cached = store.parts_of(upload.upload_id)
        await self._push(upload, backend_upload_id,
                         [cached[p.part_number] for p in chosen if p.part_number in cached])
        await tier.acquire_clean(bk)
        try:
            await tier.invalidate(bk)
            try:
                info = await self._native.complete_multipart_upload(
                    *bk, backend_upload_id,
                    [CompletedPart(p.part_number, p.etag) for p in chosen],
                    if_match=if_match, if_none_match=if_none_match)
            except NoSuchUpload:
                info = await self._completed_before(upload, chosen)
            store.invalidate_fills(bk)
            return info
        finally:
            store.keys.release(bk)

    async def _completed_before(self, upload: Upload, chosen: Sequence[PartInfo]
                                ) -> ObjectInfo:
        """The backend upload is gone: completed by an attempt interrupted before its
        removal was recorded if the object has exactly the expected ETag."""
        try:
            info = await self._tier.inner.head_object(upload.bucket, upload.key)
        except NoSuchKey:
            raise NoSuchUpload(upload.upload_id) from None
        if info.etag != multipart_etag(chosen):
            raise NoSuchUpload(upload.upload_id)
        return info

    async def _push(self, upload: Upload, backend_upload_id: str, parts: list[Part]) -> None:
        """Send cached parts into the backend upload, then record them as backend parts in
        one batch (their files are freed; a retried completion does not send them again)."""
        if not parts:
            return
        store = self._store
        segments = [p.segment for p in parts]
        store.space.pin(segments)
        try:
            sent = await self._send_cached(upload, backend_upload_id, parts)
            batch = Batch().delete_parts(upload.upload_id, [p.part_number for p in parts])
            for part in sent:
                batch.put_backend_part(upload.upload_id, part)
            await store.index.commit(batch, sync=store.sync)
            mine = self._parts.setdefault(upload.upload_id, {})
            for part in sent:
                store.forget_part(upload.upload_id, part.part_number)
                mine[part.part_number] = part
            await store.space.discard(segments)  # deleted once unpinned below
        finally:
            await store.space.unpin(segments)

    async def _send_cached(self, upload: Upload, backend_upload_id: str,
                           parts: list[Part]) -> list[BackendPart]:
        limit = asyncio.Semaphore(_PARALLEL_PARTS)
        sent: list[BackendPart] = []

        async def one(part: Part) -> None:
            async with limit:
                body = self._reader(part.segment, part.checksum)
                try:
                    info = await self._native.upload_part(
                        upload.bucket, upload.key, backend_upload_id, part.part_number, body,
                        content_md5=bytes.fromhex(part.etag))
                finally:
                    await body.aclose()
            if info.etag != part.etag:
                raise BadDigest(f"backend part ETag {info.etag} != cached {part.etag}")
            sent.append(BackendPart(part.part_number, info.etag, info.size,
                                    info.last_modified, part.checksum))

        try:
            async with asyncio.TaskGroup() as group:
                for part in parts:
                    group.create_task(one(part))
        except BaseExceptionGroup as exc:
            first = exc.exceptions[0]
            if isinstance(first, NoSuchUpload):  # the backend upload is gone
                raise NoSuchUpload(upload.upload_id) from exc
            raise first from exc
        return sent

    def _reader(self, segment: Segment, checksum: tuple[str, str] | None) -> Relay:
        stats = self._store.stats

        def count(n: int) -> None:
            stats.backend_client_bytes_total += n
        return backend_body(self._store, (segment,), count, checksum=checksum,
                            md5=segment.md5)
