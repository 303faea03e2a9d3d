"""Background flushing of DIRTY records to the inner backend.

Oldest first (sequence order), at most one flush per key at a time (so the newest
version of a key always reaches the backend last), bounded concurrency decided by the
:class:`~gateway.cache.policy.WritebackPolicy`, exponential backoff on errors. A record
becomes CLEAN only when the backend confirmed an ETag equal to the cached one; a flush
whose record was replaced meanwhile changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

from backends.core.base import Backend, CompletedPart, MultipartBackend, ObjectMeta, Relay
from backends.core.errors import BadDigest, EntityTooSmall, NoSuchUpload, NotImplementedByBackend
from backends.core.upload_checksums import FULL_OBJECT, UploadChecksum, checksum_type, declare
from gateway.background import PeriodicTask
from gateway.cache.admission import Admission
from gateway.cache.entry import Entry, EntryState, Segment
from gateway.cache.flush_health import FlushFailures
from gateway.cache.index import Batch
from gateway.cache.policy import WritebackPolicy
from gateway.cache.quarantine import Quarantine, QuarantinedFlush
from gateway.cache.readers import backend_body
from gateway.cache.store import BK, CacheStore

log = logging.getLogger(__name__)

_PART_PARALLELISM = 2
_RETRY_BASE_S = 0.05
#: Delays the flush of ``(bucket, nbytes)`` to the bucket's QoS gear (docs/qos.md).
FlushPacer = Callable[[str, int], Awaitable[None]]


def _upload_meta(entry: Entry) -> ObjectMeta:
    """The metadata of the backend upload that writes a cached multipart object: a
    full-object checksum is declared when every part carries a checksum of its algorithm,
    so the backend combines it from them (a composite one is what the backend computes
    anyway)."""
    meta = entry.meta
    if meta.checksum is None or checksum_type(meta.checksum[1]) != FULL_OBJECT or any(
            s.checksum is None or s.checksum[0] != meta.checksum[0] for s in entry.segments):
        return meta
    return declare(meta, UploadChecksum(meta.checksum[0], FULL_OBJECT))


class Flusher:
    def __init__(self, store: CacheStore, inner: Backend, policy: WritebackPolicy, *,
                 admission: Admission | None = None) -> None:
        self._store = store
        self._admission = admission
        self._inner = inner
        self._policy = policy
        self._settings = store.settings
        self._tasks: list[asyncio.Task[None]] = []
        self._control = PeriodicTask(self._tick, every=self._settings.control_interval_s,
                                     name="cache-control", log=log,
                                     failed="cache writeback controller")
        self._inflight: set[BK] = set()
        self._running: dict[BK, asyncio.Task[None]] = {}  # the flush of each key in flight
        self._held: set[BK] = set()  # keys not to flush now (held_back)
        self._attempts: dict[BK, int] = {}
        self._retry_at: dict[BK, float] = {}
        self._forced: set[BK] = set()  # flushes started only to make room
        # Of each upload in flight: its record's seq and size, and the bytes sent so far
        # (what ``wait_flushed`` and the status count as flushed before the record is).
        self._sent: dict[BK, list[int]] = {}
        #: QoS pacing of every flush (set by the composition root); None: no pacing
        self.pace: FlushPacer | None = None
        #: whether flushes keep failing (the store cannot take writes)
        self.failures = FlushFailures()
        self.quarantine = Quarantine(self._unflushed_seq,
                                     after_attempts=self._settings.quarantine_attempts,
                                     retry_s=self._settings.quarantine_retry_s)

    def _unflushed_seq(self, bk: BK) -> int | None:
        entry = self._store.get(*bk)
        return entry.seq if entry is not None and entry.dirty else None

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    def sent_in_flight(self, bucket: str | None = None, up_to_seq: int | None = None) -> int:
        """The bytes already sent of the uploads in flight (in ``bucket``, of records up
        to ``up_to_seq``): part of what is dirty is on its way."""
        return sum(min(sent, size) for (b, _), (seq, size, sent) in self._sent.items()
                   if (bucket is None or b == bucket)
                   and (up_to_seq is None or seq <= up_to_seq))

    def start(self) -> None:
        self._control.start()
        if self._store.flush_uploads():
            self._tasks.append(asyncio.create_task(self._abort_orphans(),
                                                   name="cache-orphans"))
        for i in range(self._settings.flush_concurrency):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"cache-flush-{i}"))

    async def stop(self) -> None:
        await self._control.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    # -- loops -------------------------------------------------------------------------
    def _tick(self) -> None:
        """The writeback controller's step (ingest measurement, phase changes)."""
        if self._policy.tick():
            log.info("cache writeback phase: %s", self._policy.phase.value)
        self._store.changed()

    async def _abort_orphans(self) -> None:
        """Abort backend uploads of flushes interrupted by a crash (retrying until done)."""
        store = self._store
        delay = _RETRY_BASE_S
        while orphans := store.flush_uploads():
            for upload_id, (bucket, key) in orphans:
                try:
                    await self._forget_upload(bucket, key, upload_id, abort=True)
                except Exception as exc:  # noqa: BLE001 - retried with backoff
                    log.warning("aborting backend upload %s failed: %r", upload_id, exc)
            if store.flush_uploads():
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._settings.flush_retry_max_s)

    async def _forget_upload(self, bucket: str, key: str, upload_id: str, *,
                             abort: bool) -> None:
        if abort:
            inner = self._inner
            assert isinstance(inner, MultipartBackend)
            with contextlib.suppress(NoSuchUpload):
                await inner.abort_multipart_upload(bucket, key, upload_id)
        await self._store.index.commit(Batch().delete_flush_upload(upload_id), sync=False)
        self._store.drop_flush_upload(upload_id)

    async def _worker(self) -> None:
        while True:
            event = self._store.event
            entry = self._pick()
            if entry is None:
                await self._store.wait_change(self._settings.control_interval_s, event)
                continue
            flush = asyncio.ensure_future(self._flush(entry))
            self._running[entry.bk] = flush
            try:
                await asyncio.wait([flush])
            except asyncio.CancelledError:  # the flusher stops
                flush.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await flush
                raise
            finally:
                self._running.pop(entry.bk, None)

    @contextlib.asynccontextmanager
    async def held_back(self, bk: BK) -> AsyncIterator[None]:
        """No flush of ``bk`` meanwhile: the one in flight is stopped (entering returns
        once it has ended; a backend write that had already committed stays committed,
        one that had not commits nothing), and none starts until the block ends."""
        self._held.add(bk)
        try:
            flush = self._running.get(bk)
            if flush is not None and not flush.done():
                flush.cancel()
                await asyncio.wait([flush])
            yield
        finally:
            self._held.discard(bk)

    def _pick(self) -> Entry | None:
        entry = self._pick_entry()
        if entry is not None and self._policy.making_room:
            self._forced.add(entry.bk)
        return entry

    def _pick_entry(self) -> Entry | None:
        if len(self._inflight) >= self._policy.allowed_flushes():
            return None
        now = time.monotonic()

        def ready(entry: Entry) -> bool:
            return entry.bk not in self._inflight and entry.bk not in self._held \
                and self._retry_at.get(entry.bk, 0) <= now

        store = self._store
        for bk in store.urgent_keys():
            current = store.get(*bk)
            if current is None or not current.dirty:
                store.clear_urgent(bk)
            elif current.state is EntryState.DIRTY and ready(current):
                taken = store.take_specific(current)
                if taken is not None:
                    self._inflight.add(bk)
                    return taken
        entry = store.take_dirty(ready)
        if entry is not None:
            self._inflight.add(entry.bk)
        return entry

    # -- one flush ---------------------------------------------------------------------
    async def _flush(self, entry: Entry) -> None:
        ok = False
        started = time.monotonic()
        try:
            if self.pace is not None:
                await self.pace(entry.bucket, 0 if entry.deleted else entry.size)
                started = time.monotonic()  # the backend's time excludes the QoS wait
            if entry.deleted:
                await self._inner.delete_object(entry.bucket, entry.key)
            else:
                await self._upload(entry)
            ok = True
            self.failures.succeeded()
            if self._admission is not None and not entry.deleted:
                self._admission.observe_backend(entry.size, time.monotonic() - started,
                                                self._store.now(), flush=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is retried with backoff
            if self._admission is not None:
                self._admission.backend_failed()
            self._store.stats.flush_errors_total += 1
            self.failures.failed(exc)
            attempts = self._attempts.get(entry.bk, 0) + 1
            self._attempts[entry.bk] = attempts
            delay = min(self._settings.flush_retry_max_s, _RETRY_BASE_S * 2 ** (attempts - 1))
            quarantined = self.quarantine.failed(entry.bk, entry.seq, exc, attempts)
            if quarantined is not None:
                delay = quarantined
            self._retry_at[entry.bk] = time.monotonic() + delay
            log.warning("flushing %s/%s failed (attempt %d, %sretry in %.2fs): %r",
                        entry.bucket, entry.key, attempts,
                        "quarantined, " if quarantined is not None else "", delay, exc)
        finally:
            await asyncio.shield(self._finish(entry, ok))

    async def _finish(self, entry: Entry, ok: bool) -> None:
        store, bk = self._store, entry.bk
        try:
            async with store.keys.hold(bk):
                current = store.get(*bk)
                if current is None or current.seq != entry.seq \
                        or current.state is not EntryState.FLUSHING:
                    return  # replaced meanwhile: the newer record flushes on its own
                if not ok:
                    store.set_memory(bk, replace(current, state=EntryState.DIRTY))
                    return
                store.stats.flushes_total += 1
                self.quarantine.flushed(bk)
                self._attempts.pop(bk, None)
                self._retry_at.pop(bk, None)
                if current.deleted:
                    await store.commit(bk, None, sync=False)
                else:
                    await store.commit(bk, replace(current, state=EntryState.CLEAN,
                                                   dirty_since=None), sync=False)
                store.flushed(bk)
        finally:
            self._inflight.discard(bk)
            self._sent.pop(bk, None)  # counted by the store once flushed (no await between)
            # Premature (III-A.3): picked, or needed, only to make room in phase 1.
            forced = bk in self._forced or self._policy.making_room
            self._forced.discard(bk)
            if ok and forced:
                store.stats.forced_flush_bytes_total += entry.size
            if ok:
                store.clear_urgent(bk)
            store.changed()

    def _reader(self, entry: Entry, segments: tuple[Segment, ...],
                hasher: Callable[[bytes], None] | None = None, *,
                checksum: tuple[str, str] | None = None,
                md5: str | None = None) -> Relay:
        """The bytes of ``segments`` (of ``entry``) for the backend
        (:func:`backend_body`), counted as flushed."""
        stats = self._store.stats
        sent = self._sent.setdefault(entry.bk, [entry.seq, entry.size, 0])

        def count(n: int) -> None:
            stats.flush_bytes_total += n
            sent[2] += n
        return backend_body(self._store, segments, count, hasher, checksum=checksum, md5=md5)

    async def _upload(self, entry: Entry) -> None:
        store = self._store
        # Data files stay until the flush read them; inline bytes are held by ``entry``.
        files = [s for s in entry.segments if s.inline is None]
        store.space.pin(files)
        try:
            if "-" in entry.etag and isinstance(self._inner, MultipartBackend):
                try:
                    await self._upload_multipart(entry)
                    return
                except (NotImplementedByBackend, EntityTooSmall) as exc:
                    log.info("multipart flush of %s/%s not possible (%r); single put",
                             entry.bucket, entry.key, exc)
            await self._upload_single(entry)
        finally:
            await store.space.unpin(files)

    async def _upload_single(self, entry: Entry) -> None:
        md5 = hashlib.md5()
        single = len(entry.segments) == 1 and "-" not in entry.etag
        expected = entry.segments[0].md5 if len(entry.segments) == 1 else None
        body = self._reader(entry, entry.segments, None if single else md5.update,
                            md5=expected)
        try:
            info = await self._inner.put_object(
                entry.bucket, entry.key, body, meta=entry.meta,
                content_md5=bytes.fromhex(expected) if expected else None)
        finally:
            await body.aclose()
        want = expected or md5.hexdigest()
        if info.etag != want:
            raise BadDigest(f"backend ETag {info.etag} != cached MD5 {want}")

    async def _upload_multipart(self, entry: Entry) -> None:
        inner = self._inner
        assert isinstance(inner, MultipartBackend)
        store = self._store
        with store.creating_backend_upload(entry.bk):  # hidden before its id is known
            upload = await inner.create_multipart_upload(entry.bucket, entry.key,
                                                         meta=_upload_meta(entry))
        store.add_flush_upload(upload.upload_id, entry.bk)  # hidden from listings at once
        try:
            await store.index.commit(Batch().put_flush_upload(
                upload.upload_id, entry.bucket, entry.key), sync=store.sync)
        except BaseException:
            await asyncio.shield(self._forget_upload(entry.bucket, entry.key,
                                                     upload.upload_id, abort=True))
            raise
        limit = asyncio.Semaphore(_PART_PARALLELISM)

        async def part(number: int, seg: Segment) -> None:
            async with limit:
                body = self._reader(entry, (seg,), checksum=seg.checksum, md5=seg.md5)
                try:
                    info = await inner.upload_part(entry.bucket, entry.key, upload.upload_id,
                                                   number, body,
                                                   content_md5=bytes.fromhex(seg.md5))
                finally:
                    await body.aclose()
                if info.etag != seg.md5:
                    raise BadDigest(f"backend part ETag {info.etag} != cached {seg.md5}")

        try:
            async with asyncio.TaskGroup() as group:
                for number, seg in enumerate(entry.segments, start=1):
                    group.create_task(part(number, seg))
            info = await inner.complete_multipart_upload(
                entry.bucket, entry.key, upload.upload_id,
                [CompletedPart(n, s.md5) for n, s in enumerate(entry.segments, start=1)])
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._forget_upload(entry.bucket, entry.key,
                                                         upload.upload_id, abort=True))
            if isinstance(exc, BaseExceptionGroup):
                raise exc.exceptions[0] from exc
            raise
        await asyncio.shield(self._forget_upload(entry.bucket, entry.key, upload.upload_id,
                                                 abort=False))
        if info.etag != entry.etag:
            raise BadDigest(f"backend ETag {info.etag} != cached {entry.etag}")

    def retry_now(self) -> None:
        """Retry every record waiting out a backoff at once (the store is back, or a sync
        asks); the quarantined ones keep their delay, and a failure resumes the backoff
        where it was."""
        held = {(q.bucket, q.key) for q in self.quarantine.items()}
        for bk in list(self._retry_at):
            if bk not in held:
                del self._retry_at[bk]
        self._store.changed()

    # -- waiting -----------------------------------------------------------------------
    async def wait_flushed(self, bucket: str | None = None,
                           progress: Callable[[int, int], None] | None = None
                           ) -> list[QuarantinedFlush]:
        """Return once every record dirty (in ``bucket``) at call time reached the backend
        (or was replaced by a newer write), calling ``progress(done, total)`` bytes.
        Quarantined records (the backend refuses them for good) are not waited for: they
        are returned."""
        store = self._store
        for bk in self.quarantine.retry(bucket):  # the backend may have been repaired
            self._retry_at.pop(bk, None)
        self.retry_now()  # nor do the records waiting out a backoff wait for it
        # O(1) per check: the records' sequence numbers order them (records.Watch).
        watch = store.records.watch(bucket, store.last_seq)
        reported = -1
        store.begin_drain()
        store.changed()
        try:
            while True:
                pending = store.records.pending(watch, self.quarantine.holds)
                partly = self.sent_in_flight(watch.bucket, watch.seq)
                done = min(watch.done + partly, watch.total) if pending else watch.total
                if progress is not None and done != reported:
                    progress(done, watch.total)
                    reported = done
                if not pending:
                    return [q for q in self.quarantine.items(bucket) if q.seq <= watch.seq]
                await store.wait_change(self._settings.control_interval_s)
        finally:
            store.end_drain()
            store.records.unwatch(watch)
