"""CacheTier: a bounded, crash-safe write-back cache in front of any backend.

Implements Backend, MultipartBackend and CopyingBackend by explicit delegation to an
inner backend. Writes are acknowledged once their data file and index record are
durable; the flusher moves them to the backend later. See docs/cache.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from backends.core.base import (
    Backend,
    BucketInfo,
    CompletedPart,
    CopyingBackend,
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    PartInfo,
    RangeRequest,
    Relay,
    UploadInfo,
    bare,
    final_meta,
)
from backends.core.conditions import check_write_etag
from backends.core.errors import (
    BackendError,
    BucketAlreadyOwnedByYou,
    BucketNotEmpty,
    NoSuchKey,
    NoSuchUpload,
    PreconditionFailed,
    ServiceUnavailable,
    SlowDown,
)
from backends.core.keys import check_key
from backends.core.streams import ClosingBody, CountingBody
from backends.multipart import MIN_PART_SIZE
from gateway.cache.admission import SMALL_OBJECT_BYTES, Admission
from gateway.cache.device import clamp_to_device
from gateway.cache.elastic_controller import ElasticController
from gateway.cache.entry import Entry, EntryState
from gateway.cache.fill import read_through
from gateway.cache.flusher import Flusher, FlushPacer
from gateway.cache.index import Batch
from gateway.cache.inline import inline_room
from gateway.cache.listing import cache_overlay, merge_sorted
from gateway.cache.metrics import register_metrics
from gateway.cache.policy import WritebackPolicy
from gateway.cache.provisioner import Provisioner
from gateway.cache.quarantine import QuarantinedFlush
from gateway.cache.readers import entry_stream
from gateway.cache.settings import CacheSettings, ElasticSettings
from gateway.cache.spool import CacheFull, Spooled, overflow_body, spool
from gateway.cache.store import BK, CacheStore
from gateway.cache.uploads import CachedUploads
from gateway.protocol.listing import closing

log = logging.getLogger(__name__)
T = TypeVar("T")

#: How long DeleteBucket waits for the bucket's pending deletions to reach the backend
#: before it answers 503 SlowDown (the flushes go on; the request can be sent again).
BUCKET_DRAIN_TIMEOUT_S = 60.0


class CacheTier:
    """The cache tier over ``inner``.

    ``index_path`` is the RocksDB directory; ``registry`` receives the ``squall_cache_*``
    metrics; ``backend_bandwidth`` (bytes/s) is the throttle's cap on the backend, if
    any; B of the writeback and elastic controllers is ``backend_estimate`` (declared, not
    a cap), else that cap, else measured from flushes. ``start()`` opens volumes and
    index and starts the flusher; ``aclose()`` stops everything and closes ``inner``.
    With ``elastic`` and a ``provisioner``, capacity is attached only while a write burst
    lasts (:mod:`gateway.cache.elastic`); ``volume_listeners`` are called just before and
    just after each attach or detach (the cost meter samples M(t) then).
    ``backend_devices``: the file systems holding the backend's data (``LocalBackend``),
    to know when the cache shares the backend's disk.
    """

    def __init__(self, inner: Backend, settings: CacheSettings, *, index_path: Path,
                 registry: CollectorRegistry | None = None,
                 backend_bandwidth: float | None = None,
                 backend_estimate: float | None = None,
                 min_part_size: int = MIN_PART_SIZE,
                 provisioner: Provisioner | None = None,
                 elastic: ElasticSettings | None = None,
                 backend_devices: frozenset[int] = frozenset()) -> None:
        if (elastic is None) != (provisioner is None):
            raise ValueError("elastic capacity needs both its settings and a provisioner")
        if not settings.enabled and elastic is None:
            raise ValueError("CacheTier needs at least one cache volume with capacity > 0")
        self._inner = inner
        self._settings = settings
        self._store = CacheStore(settings, index_path)
        self._bandwidth = backend_estimate or backend_bandwidth
        self._backend_devices = backend_devices
        self._overflow = False  # see _overflowed
        self.bucket_drain_timeout_s = BUCKET_DRAIN_TIMEOUT_S
        self._registry = registry
        self._policy: WritebackPolicy | None = None
        self._flusher: Flusher | None = None
        self._unreachable = False  # the store's probe says so (backend_reachable)
        self._uploads = CachedUploads(self, inner, self._store, min_part_size)
        self.admission = Admission(settings.admission, backend_bandwidth=backend_bandwidth)
        self._buckets: set[str] = set()
        self._commits: set[asyncio.Task[Any]] = set()
        self._provisioner = provisioner
        self._elastic_settings = elastic
        self._elastic: ElasticController | None = None
        self.volume_listeners: list[Callable[[], object]] = []
        self._started = self._store.now()

    @property
    def inner(self) -> Backend:
        """The backend this tier caches."""
        return self._inner

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        handles = await self._provisioner.list() if self._provisioner is not None else []
        recovered = await self._store.open([(h.path, h.size_bytes) for h in handles])
        for vol in self._store.space.volumes.values():
            clamp_to_device(vol)
        self._policy = WritebackPolicy(self._store, self._settings, self._bandwidth,
                                       shares_disk=lambda: self.shares_disk)
        self._flusher = Flusher(self._store, self._inner, self._policy,
                                admission=self.admission)
        if self._provisioner is not None and self._elastic_settings is not None:
            self._elastic = ElasticController(self._store, self._policy, self._provisioner,
                                              self._elastic_settings, self._settings,
                                              listeners=self.volume_listeners)
            await self._elastic.start(list(zip(handles, recovered, strict=True)))
        if self._registry is not None:
            register_metrics(self._registry, self.status)
            if self._elastic is not None:
                self._elastic.register_metrics(self._registry)
        self._flusher.start()

    async def aclose(self) -> None:
        if self._elastic is not None:
            await self._elastic.stop()
        if self._flusher is not None:
            await self._flusher.stop()
        if self._commits:
            await asyncio.gather(*self._commits, return_exceptions=True)
        await self._store.close()
        await self._inner.aclose()

    @property
    def policy(self) -> WritebackPolicy:
        if self._policy is None:
            raise ServiceUnavailable("the cache tier is not started")
        return self._policy

    @property
    def store(self) -> CacheStore:
        return self._store

    @property
    def elastic(self) -> ElasticController | None:
        """The elastic controller (``cache_mode = "elastic"``), once started."""
        return self._elastic

    @property
    def write_around(self) -> bool:
        """New writes go straight to the backend: phase 2 (unless the backend is failing:
        the cache absorbs them then), or no volume takes writes."""
        return (self.policy.write_around and not self.backend_failing) \
            or not self._store.space.active_volumes

    @property
    def backend_failing(self) -> bool:
        """The backend takes no writes now: its probe found it unreachable, or its last
        flush failed for a reason that is not one record's own (flush_health.py)."""
        return self._unreachable or (self._flusher is not None
                                     and self._flusher.failures.failing)

    def unflushed_room(self) -> int:
        """Bytes the volumes taking writes hold beyond unflushed records and cached parts
        (clean data is evicted for new writes)."""
        store = self._store
        held = store.dirty_bytes + store.part_bytes
        return sum(v.capacity for v in store.space.active_volumes) - held

    def _overflowed(self) -> bool:
        """Whether a burst overflowed the cache: a write was sent past it because it was
        full, and flushes have not given back a quarter of its capacity since. New
        writes then go past it at once: a write that took the little room left would
        only be sent again (a PUT re-read from its file, an upload's cached part at its
        completion)."""
        if self._overflow and self.unflushed_room() >= self._store.space.capacity // 4:
            self._overflow = False
        return self._overflow

    def bypass_cache(self, size: int | None, *, part: bool = False,
                     parts_cached: bool = False, parts_past: bool = False) -> bool:
        """Whether a new write of ``size`` bytes (None: unknown) goes past the cache to
        the backend (docs/cache.md, "Admission"). A ``part`` of an upload held in the
        cache goes past only when the rates say so: not as a probe of the backend, nor
        for phase 2, and not at all once its upload holds parts in the cache
        (``parts_cached``): one part past makes the whole upload complete on the
        backend, its cached parts sent there at completion. An upload whose parts went
        past (``parts_past``) and none to the cache keeps them there; while a burst
        overflows the cache (:meth:`_overflowed`) other writes go past it too."""
        store = self._store
        if not store.space.active_volumes or (size is not None
                                              and size > store.space.max_object):
            return True
        if (size is not None and size <= store.settings.inline_max_bytes
                and self._elastic is None
                and inline_room(store.index.inline, size, store.space.capacity)):
            # Inline: one shared index sync, never dearer than a backend file, in phase 2
            # too (a stream of small writes is little ingest in bytes, much in requests).
            return False
        if part and parts_cached:
            return False
        if self.admission.backend_ok and ((part and parts_past) or self._overflowed()):
            return True
        if self.policy.write_around and not self.backend_failing and not part:
            return True
        # Elastic capacity measures the backend by its flushes (at full speed while a volume
        # drains) and by every write around the cache between bursts: no write of a burst
        # is sent past its volume as a probe (the volume learned from the burst would be
        # too small for the next one by that write).
        return self.admission.prefer_backend(size, store.now(),
                                             probe=not part and self._elastic is None)

    @property
    def shares_disk(self) -> bool:
        """Whether the cache competes with the backend for one disk: a volume taking
        writes is on a file system holding the backend's data (every cached byte then
        costs that disk a second write when it is flushed), and no configured
        ``backend_bandwidth`` keeps the backend below the disk's rate (a cap leaves the
        cache the rest)."""
        devices = self._backend_devices
        return bool(devices) and self.admission.backend_bandwidth is None and any(
            v.device in devices for v in self._store.space.active_volumes)

    def waits_for_room(self, size: int | None) -> bool:
        """Whether a part of ``size`` bytes of an upload held in the cache that finds the
        cache full waits for room rather than go to the backend now (docs/cache.md,
        "Uploads larger than the cache"). Sent there, it makes its upload complete on the
        backend, the cached parts sent at completion. Only an elastic cache makes it wait,
        in front of a backend not measured as fast and off the backend's disk: room comes
        there from a new volume. Room a flush makes comes no faster than the backend
        would take the part, and waiting for it would cost the bytes a second trip."""
        return (self._elastic is not None and not self.shares_disk
                and not self.admission.backend_keeps_up(size))

    async def admit(self, size: int | None, *, require: bool = False) -> None:
        """Before a write of ``size`` bytes (None: unknown): with elastic capacity, attach
        a volume first if the write is part of a burst (see ElasticController.admit)."""
        if self._elastic is not None and (require or not self._store.space.active_volumes
                                          or self.policy.write_around):
            await self._elastic.admit(size, require=require)

    def volume_status(self) -> list[dict[str, Any]]:
        """``cache_volumes`` of the status: every volume attached now."""
        if self._elastic is not None:
            return self._elastic.volume_status()
        return [{"id": v.id, "path": str(v.path), "provider": "static",
                 "size_bytes": v.capacity, "used_bytes": v.used,
                 "bandwidth_bytes_per_s": None, "attached_since": self._started,
                 "state": "active"} for v in self._store.space.volumes.values()]

    async def wait_flushed(self, bucket: str | None = None,
                           progress: Callable[[int, int], None] | None = None
                           ) -> list[QuarantinedFlush]:
        """Return once everything dirty (in ``bucket``) now is on the backend, except the
        quarantined records (refused by the backend for good), which are returned."""
        if self._flusher is None:
            raise ServiceUnavailable("the cache tier is not started")
        return await self._flusher.wait_flushed(bucket, progress)

    def pace_flushes(self, pace: FlushPacer) -> None:
        """Each flush waits for ``pace(bucket, bytes)`` first (QoS, a cluster member's
        lease); call once the tier started."""
        if self._flusher is not None:
            self._flusher.pace = pace

    @contextlib.asynccontextmanager
    async def flushes_held_back(self, bucket: str, key: str) -> AsyncIterator[None]:
        """No flush of the key meanwhile; the one in flight is stopped first (a key
        handed over to another cluster member: its flush must not land after theirs)."""
        if self._flusher is None:
            yield
            return
        async with self._flusher.held_back((bucket, key)):
            yield

    async def drain_bucket(self, bucket: str) -> None:
        """Wait until what is unflushed in ``bucket`` now (before DeleteBucket: its pending
        deletions) is on the backend, for at most ``bucket_drain_timeout_s``: SlowDown
        after that (a throttled or failing backend; the flushes go on)."""
        try:
            await asyncio.wait_for(self.wait_flushed(bucket), self.bucket_drain_timeout_s)
        except TimeoutError:
            raise SlowDown(f"the deletions pending in bucket {bucket} have not reached the "
                           "backend yet; send DeleteBucket again later",
                           retry_after=5) from None

    def status(self) -> dict[str, Any]:
        store, stats = self._store, self._store.stats
        oldest = store.oldest_dirty_since()
        policy = self._policy
        return {
            "dirty_bytes": store.dirty_bytes,
            "dirty_objects": store.dirty_count,
            "cache_used_bytes": store.space.used,
            "cache_capacity_bytes": store.space.capacity,
            "oldest_dirty_age_s": max(0.0, store.now() - oldest) if oldest else 0.0,
            "flush_phase": policy.phase.value if policy else "idle",
            "flush_bytes_total": stats.flush_bytes_total,
            "flushes_total": stats.flushes_total,
            "flush_errors_total": stats.flush_errors_total,
            "flush_inflight": self._flusher.inflight if self._flusher else 0,
            "flush_inflight_sent_bytes": self._flusher.sent_in_flight() if self._flusher else 0,
            "ingest_bytes_total": stats.ingest_bytes_total,
            "writearound_bytes_total": stats.writearound_bytes_total,
            "diverted_bytes_total": stats.diverted_bytes_total,
            "ingest_rate_bytes_per_s": policy.ingest_rate if policy else 0.0,
            "backend_bandwidth_bytes_per_s": policy.bandwidth if policy else None,
            "hits": stats.hits,
            "misses": stats.misses,
            "evictions": stats.evictions,
            "read_copies_total": stats.read_copies_total,
            "slowdowns": stats.slowdowns_total,
            "uploads": len(store.uploads_in()),
            "cache_mode": "elastic" if self._elastic_settings is not None else "static",
            "cache_volumes": self.volume_status(),
            "cache_volumes_attached": len(store.space.volumes),
            "forced_flush_bytes_total": stats.forced_flush_bytes_total,
            "admission": self.admission.status(),
            **self._quarantine_status(),
            **({"elastic": self._elastic.status()} if self._elastic is not None else {}),
        }

    async def check_health(self) -> str | None:
        """:attr:`unhealthy`, after one test write when the index had failed: once its
        cause is gone (space returned), the gateway is healthy again without waiting for
        a client's write."""
        if self.unhealthy is not None:
            with contextlib.suppress(ServiceUnavailable, SlowDown):
                await self._store.index.commit(Batch().put_format(), sync=True)
        return self.unhealthy

    @property
    def degraded(self) -> str | None:
        """Why the backend takes no flushes now (they have kept failing while data waits
        for them), else None: writes are still absorbed while the cache has room."""
        if self._flusher is None:
            return None
        return self._flusher.failures.problem(pending=self._store.dirty_count > 0)

    def backend_reachable(self, reachable: bool) -> None:
        """The store's reachability changed (a probe said so). Unreachable: writes stop
        going past the cache (they wait for room, then SlowDown). Reachable again: the
        flushes waiting out a backoff start at once."""
        self._unreachable = not reachable
        if not reachable:
            self.admission.backend_failed()
        elif self._flusher is not None:
            self._flusher.retry_now()

    @property
    def unhealthy(self) -> str | None:
        """Why writes cannot be acknowledged now (the index refuses writes), else None."""
        index = self._store.index if self._store.opened else None
        if index is not None and index.failure is not None:
            return f"the cache index cannot be written: {index.failure}"
        return None

    def _quarantine_status(self) -> dict[str, Any]:
        held = self._flusher.quarantine.items() if self._flusher is not None else []
        return {"quarantined_objects": len(held),
                "quarantined": [q.describe() for q in held[:20]]}

    # -- helpers -----------------------------------------------------------------------
    async def shielded(self, work: Awaitable[T]) -> T:
        """Run a commit to completion even if the caller is cancelled meanwhile."""
        task = asyncio.ensure_future(work)
        self._commits.add(task)
        task.add_done_callback(self._commits.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return await asyncio.shield(task)

    async def check_bucket(self, bucket: str) -> None:
        if bucket not in self._buckets:
            await self._inner.head_bucket(bucket)
            self._buckets.add(bucket)

    def count_ingest(self, n: int) -> None:
        self._store.stats.ingest_bytes_total += n

    def retry_after(self) -> float:
        bandwidth = self._policy.bandwidth if self._policy else None
        return self._store.dirty_bytes / bandwidth if bandwidth else 1.0

    async def check_preconditions(self, bk: BK, if_match: str | None,
                                  if_none_match: str | None) -> None:
        """Conditions against the newest state of ``bk`` (caller holds its key lock)."""
        if if_match is None and if_none_match is None:
            return
        entry = self._store.get(*bk)
        etag: str | None
        if entry is not None:
            etag = None if entry.deleted else entry.etag
        else:
            try:
                etag = (await self._inner.head_object(*bk)).etag
            except NoSuchKey:
                etag = None
        check_write_etag(*bk, etag, if_match, if_none_match)

    async def acquire_clean(self, bk: BK) -> None:
        """Take the key lock of ``bk`` once it has no unflushed record (asking the
        flusher to hurry); SlowDown after the backpressure timeout."""
        store = self._store
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.backpressure_timeout_s
        while True:
            entry = store.get(*bk)
            if entry is None or not entry.dirty:
                await store.keys.acquire(bk)
                entry = store.get(*bk)
                if entry is None or not entry.dirty:
                    return
                store.keys.release(bk)
            remaining = deadline - loop.time()
            if remaining <= 0:
                store.stats.slowdowns_total += 1
                raise SlowDown("waiting for an earlier version to reach the backend",
                               retry_after=1)
            store.make_urgent(bk)
            store.changed()
            await store.wait_change(min(remaining, self._settings.control_interval_s))

    async def invalidate(self, bk: BK) -> None:
        """Drop the (clean) record of ``bk`` before writing past the cache; the synced
        index write also makes earlier unsynced removals durable (WAL order)."""
        if self._store.get(*bk) is not None:
            await self._store.commit(bk, None, sync=self._store.sync)
        elif self._store.unsynced(bk):
            await self._store.barrier()

    def counted_past(self, body: DescribedBody, *, diverted: bool = False) -> Relay:
        """``body`` on its way past the cache, counted as client traffic and ingest
        (``diverted``: and as diverted past a full cache)."""
        stats = self._store.stats

        def count(n: int) -> None:
            stats.backend_client_bytes_total += n
            stats.ingest_bytes_total += n
            stats.writearound_bytes_total += n
            if diverted:
                stats.diverted_bytes_total += n
        return Relay(CountingBody(body, count), body.facts)

    # -- buckets -----------------------------------------------------------------------
    async def list_buckets(self) -> list[BucketInfo]:
        return await self._inner.list_buckets()

    async def create_bucket(self, bucket: str) -> BucketInfo:
        try:
            info = await self._inner.create_bucket(bucket)
        except BucketAlreadyOwnedByYou:
            self._buckets.add(bucket)
            raise
        self._buckets.add(bucket)
        return info

    async def head_bucket(self, bucket: str) -> BucketInfo:
        info = await self._inner.head_bucket(bucket)
        self._buckets.add(bucket)
        return info

    async def delete_bucket(self, bucket: str) -> None:
        await self.check_bucket(bucket)
        store = self._store
        if store.records.has_live_dirty(bucket):
            raise BucketNotEmpty(bucket)
        mine = store.uploads_in(bucket)
        if mine:
            # Uploads in progress go with a bucket that has no objects, as on S3; the
            # backend aborts its own in its delete_bucket.
            async with closing(self.iter_objects(bucket)) as listing:
                async for _ in listing:
                    raise BucketNotEmpty(bucket)
            for upload in mine:
                with contextlib.suppress(NoSuchUpload):
                    await self._uploads.abort(bucket, upload.key, upload.upload_id)
        await self.drain_bucket(bucket)  # pending deletes must reach the backend first
        await self._inner.delete_bucket(bucket)
        self._buckets.discard(bucket)
        while keys := list(itertools.islice(store.entries_of(bucket), 1024)):
            for key in keys:  # (each commit awaits: the records are read afresh per batch)
                async with store.keys.hold((bucket, key)):
                    await store.commit((bucket, key), None, sync=False)

    # -- objects -----------------------------------------------------------------------
    async def put_object(self, bucket: str, key: str, body: DescribedBody, *,
                         meta: ObjectMeta, content_md5: bytes | None = None,
                         if_match: str | None = None, if_none_match: str | None = None,
                         size_hint: int | None = None) -> ObjectInfo:
        """Store ``body`` in the cache (write-back), or past it when the writeback is in
        phase 2 or the object cannot fit (``size_hint`` larger than a volume, or the
        body turns out so while it streams)."""
        check_key(key)
        await self.check_bucket(bucket)
        bk = (bucket, key)
        store = self._store
        declared = size_hint if size_hint is not None else body.facts.declared_length
        await self.admit(declared)
        with self.admission.writing(declared):
            current = store.get(*bk)
            started = asyncio.get_running_loop().time()
            past = self.bypass_cache(declared)
            self.admission.count(past)
            if past and (current is None or not current.dirty or not store.space.volumes):
                return await self._put_direct(bk, body, meta, content_md5, if_match,
                                              if_none_match, measure=True)
            spooled = await self.spool_admitted(body, content_md5)
            if spooled is None:
                return await self._put_direct(bk, body, meta, content_md5, if_match,
                                              if_none_match, diverted=True)
            if spooled.overflow:
                try:
                    return await self._put_direct(bk, overflow_body(store, spooled, body),
                                                  meta, content_md5, if_match, if_none_match,
                                                  counted=spooled.consumed, diverted=True,
                                                  cleanup=lambda: spooled.discard(store))
                finally:
                    await spooled.discard(store)
            meta = final_meta(meta, body)
            now = store.now()
            seg = spooled.segment

            async def commit() -> ObjectInfo:
                try:
                    async with store.keys.hold(bk):
                        await self.check_preconditions(bk, if_match, if_none_match)
                        entry = Entry(bucket=bucket, key=key, state=EntryState.DIRTY,
                                      seq=store.next_seq(), size=seg.size, etag=seg.md5, meta=meta,
                                      segments=(seg,), last_modified=now, dirty_since=now)
                        await store.commit(bk, entry, sync=store.sync)
                        spooled.settle(store)
                        self.admission.observe_cache(
                            seg.size, asyncio.get_running_loop().time() - started, now)
                        return entry.info()
                except BaseException:
                    await spooled.discard(store)
                    raise
            return await self.shielded(commit())

    async def spool_admitted(self, body: AsyncIterator[bytes], content_md5: bytes | None,
                             *, wait_for_room: bool = False) -> Spooled | None:
        """Spool ``body`` into the cache. A full cache sends the write to the backend
        rather than making it wait for room: None when that happens before any byte was
        read, an ``overflow`` after. While the backend fails, the writer waits for room
        instead (backpressure, then SlowDown); with ``wait_for_room`` (see
        :meth:`waits_for_room`) also while flushes can make room on its volume."""
        divert = self.admission.backend_ok
        try:
            spooled = await spool(self._store, body, content_md5=content_md5,
                                  allow_overflow=True, wait=not divert,
                                  divert_when_full=divert, wait_for_flushes=wait_for_room,
                                  on_bytes=self.count_ingest, retry_after=self.retry_after)
        except CacheFull:
            self._overflow = True
            return None
        if spooled.overflow:
            self._overflow = True
        return spooled

    async def _put_direct(self, bk: BK, body: DescribedBody, meta: ObjectMeta,
                          content_md5: bytes | None, if_match: str | None,
                          if_none_match: str | None, counted: int = 0,
                          cleanup: Callable[[], Awaitable[None]] | None = None,
                          measure: bool = False, diverted: bool = False) -> ObjectInfo:
        """Write straight to the backend, once no older version waits in the cache.
        ``cleanup`` runs before the key is released (so the reply is not delayed past
        a later writer's); ``measure`` feeds the backend rate of the admission rule;
        ``diverted``: the cache was full (counted apart from writes routed past it)."""
        await self.acquire_clean(bk)
        try:
            await self.invalidate(bk)
            self._store.stats.ingest_bytes_total -= counted  # already counted by spool
            started = asyncio.get_running_loop().time()
            try:
                info = await self._inner.put_object(
                    bk[0], bk[1], self.counted_past(body, diverted=diverted), meta=meta,
                    content_md5=content_md5, if_match=if_match, if_none_match=if_none_match)
            except (SlowDown, ServiceUnavailable, BackendError, OSError):
                self.admission.backend_failed()
                raise
            if measure:
                self.admission.observe_backend(
                    info.size, asyncio.get_running_loop().time() - started, self._store.now())
            self._store.invalidate_fills(bk)
            return info
        finally:
            try:
                if cleanup is not None:
                    await cleanup()
            finally:
                self._store.keys.release(bk)

    async def get_object(self, bucket: str, key: str, *,
                         byte_range: RangeRequest | None = None) -> ObjectStream:
        store = self._store
        entry = store.get(bucket, key)
        if entry is not None and not (
                byte_range is None and entry.state is EntryState.CLEAN
                and not self.admission.read_cached(entry.size, store.now())):
            if entry.deleted:
                raise NoSuchKey(bucket, key)
            resolved = byte_range.resolve(entry.size) if byte_range is not None else None
            store.stats.hits += 1
            store.touch(entry.bk)
            stream = entry_stream(store, entry, resolved)
            if resolved is None and entry.size >= SMALL_OBJECT_BYTES:
                return self._timed(stream, hit=True)
            return stream
        if entry is not None:  # clean, and the backend reads as fast: read there
            stream = await self._inner.get_object(bucket, key)
            return self._timed(await read_through(self, stream, whole=False), hit=False)
        store.stats.misses += 1
        stream = await self._inner.get_object(bucket, key, byte_range=byte_range)
        if byte_range is None and not self.admission.keep_copy(stream.info.size, store.now()):
            return self._timed(await read_through(self, stream, whole=False), hit=False)
        return await read_through(self, stream, whole=byte_range is None)

    def _timed(self, stream: ObjectStream, *, hit: bool) -> ObjectStream:
        """``stream`` whose complete read feeds the read rates of the admission rule."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        size = stream.content_length
        self.admission.begin("read", size)

        async def done(exhausted: bool) -> None:
            try:
                if exhausted:
                    self.admission.observe_read(size, loop.time() - started,
                                                self._store.now(), hit=hit)
            finally:
                self.admission.end("read", size)
        return ObjectStream(stream.info, ClosingBody(aiter(stream), done), stream.byte_range)

    async def head_object(self, bucket: str, key: str) -> ObjectInfo:
        entry = self._store.get(bucket, key)
        if entry is not None:
            if entry.deleted:
                raise NoSuchKey(bucket, key)
            return entry.info()
        return await self._inner.head_object(bucket, key)

    async def delete_object(self, bucket: str, key: str) -> None:
        check_key(key)
        await self.check_bucket(bucket)
        bk = (bucket, key)
        store = self._store

        async def run() -> None:
            async with store.keys.hold(bk):
                entry = store.get(*bk)
                if entry is None:
                    if store.unsynced(bk):
                        await store.barrier()
                    await self._inner.delete_object(bucket, key)
                    store.invalidate_fills(bk)
                    return
                if entry.deleted:
                    return
                now = store.now()
                tombstone = Entry(bucket=bucket, key=key, state=EntryState.DIRTY,
                                  seq=store.next_seq(), size=0, etag="", meta=ObjectMeta(),
                                  segments=(), last_modified=now, dirty_since=now,
                                  deleted=True)
                await store.commit(bk, tombstone, sync=store.sync)
        await self.shielded(run())

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        bk = (bucket, key)
        store = self._store

        async def run() -> ObjectInfo:
            async with store.keys.hold(bk):
                entry = store.get(*bk)
                if entry is None:
                    return await self._inner.replace_metadata(bucket, key, meta)
                if entry.deleted:
                    raise NoSuchKey(bucket, key)
                if entry.state is EntryState.CLEAN:
                    info = await self._inner.replace_metadata(bucket, key, meta)
                    new = replace(entry, meta=info.meta, etag=info.etag,
                                  last_modified=info.last_modified, seq=store.next_seq())
                else:
                    now = store.now()
                    new = replace(entry, meta=meta, state=EntryState.DIRTY,
                                  seq=store.next_seq(), last_modified=now,
                                  dirty_since=entry.dirty_since or now)
                await store.commit(bk, new, sync=store.sync)
                return new.info()
        return await self.shielded(run())

    async def iter_objects(self, bucket: str, *, prefix: str = "",
                           start_after: str = "") -> AsyncIterator[ObjectInfo]:
        """The backend's listing with the cache's records laid over it (unflushed objects
        appear, tombstones hide keys): both start by seeking to ``start_after``, the cache
        by bisection, and are read lazily (see :mod:`gateway.cache.listing`)."""
        overlay = cache_overlay(self._store, bucket, prefix, start_after)
        inner = self._inner.iter_objects(bucket, prefix=prefix, start_after=start_after)
        async with contextlib.aclosing(merge_sorted(overlay, inner, lambda i: i.key)) as merged:
            async for info in merged:  # (closed with this listing: cursor and backend fds)
                yield info

    async def copy_object(self, src_bucket: str, src_key: str, dst_bucket: str,
                          dst_key: str, *, meta: ObjectMeta,
                          src_etag: str | None = None) -> ObjectInfo:
        """Copy ``src`` to ``dst``. A source the backend holds (not cached, or clean) is
        copied by the backend itself (no bytes through the gateway, chunks shared where
        the backend can), unless the destination has an unflushed version (it would have
        to wait for it). Otherwise the copy goes through the cache: a new DIRTY object
        whose ETag is the MD5 of its bytes."""
        await self.check_bucket(dst_bucket)
        src, dst = self._store.get(src_bucket, src_key), self._store.get(dst_bucket, dst_key)
        if isinstance(self._inner, CopyingBackend) and (src is None or not src.dirty) \
                and (dst is None or not dst.dirty):
            return await self._copy_in_backend(src_bucket, src_key, (dst_bucket, dst_key),
                                               meta, src_etag)
        stream = await self.get_object(src_bucket, src_key)
        async with stream:
            if src_etag is not None and stream.info.etag != src_etag.strip('"'):
                raise PreconditionFailed()
            return await self.put_object(dst_bucket, dst_key, bare(aiter(stream)), meta=meta,
                                         size_hint=stream.info.size)

    async def _copy_in_backend(self, src_bucket: str, src_key: str, bk: BK,
                               meta: ObjectMeta, src_etag: str | None) -> ObjectInfo:
        inner = self._inner
        assert isinstance(inner, CopyingBackend)
        check_key(bk[1])
        await self.acquire_clean(bk)
        try:
            await self.invalidate(bk)
            info = await inner.copy_object(src_bucket, src_key, bk[0], bk[1], meta=meta,
                                           src_etag=src_etag)
            self._store.invalidate_fills(bk)
            return info
        finally:
            self._store.keys.release(bk)

    # -- multipart (held in the cache; see uploads.py) ---------------------------------
    async def create_multipart_upload(self, bucket: str, key: str, *,
                                      meta: ObjectMeta) -> UploadInfo:
        check_key(key)
        await self.check_bucket(bucket)
        return await self._uploads.create(bucket, key, meta)

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, *,
                          content_md5: bytes | None = None) -> PartInfo:
        return await self._uploads.upload_part(bucket, key, upload_id, part_number, body,
                                               content_md5)

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, part_number: int, *,
                               byte_range: RangeRequest | None = None,
                               src_etag: str | None = None) -> PartInfo:
        return await self._uploads.upload_part_copy(src_bucket, src_key, bucket, key,
                                                    upload_id, part_number, byte_range,
                                                    src_etag)

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        return await self._uploads.list_parts(bucket, key, upload_id)

    async def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                        parts: Sequence[CompletedPart], *,
                                        if_match: str | None = None,
                                        if_none_match: str | None = None) -> ObjectInfo:
        return await self._uploads.complete(bucket, key, upload_id, parts, if_match,
                                            if_none_match)

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        await self._uploads.abort(bucket, key, upload_id)

    async def iter_multipart_uploads(self, bucket: str, *,
                                     prefix: str = "") -> AsyncIterator[UploadInfo]:
        async for upload in self._uploads.iter_uploads(bucket, prefix):
            yield upload

