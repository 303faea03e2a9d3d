"""The cache's state: index records mirrored in memory, volumes, space, pins, key locks.

Rules that keep memory, RocksDB and the volumes consistent:

* Every index write that touches an object key happens while holding that key's lock
  (:attr:`CacheStore.keys`), after re-validating the in-memory record under it.
* In-memory records change only inside ``with self._lock`` blocks that do no I/O (the
  lock is a ``threading.Lock`` because metrics are scraped from another thread).
* A data file is unlinked only when no record references it and no reader pins it;
  until then its bytes stay charged to its volume. Files no record references are
  swept on start.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from backends.blocking import run_cache_blocking
from backends.errors import ServiceUnavailable, SlowDown
from gateway.cache.entry import Entry, EntryState, Part, Segment, Upload
from gateway.cache.index import Batch, Index
from gateway.cache.keylock import KeyLocks
from gateway.cache.records import Records
from gateway.cache.settings import CacheSettings
from gateway.cache.volumes import Volume, charge, file_ok, open_volume, sweep, unlink

log = logging.getLogger(__name__)

BK = tuple[str, str]
FileId = tuple[str, str]  # (volume id, file name)


async def wait_event(event: asyncio.Event, timeout: float | None) -> None:
    """Wait for ``event`` at most ``timeout`` seconds. (``asyncio.timeout`` rather than
    ``wait_for``, which on 3.11 can swallow a cancellation that races the event.)"""
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        pass


@dataclass
class Stats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    flush_bytes_total: int = 0
    flushes_total: int = 0
    flush_errors_total: int = 0
    ingest_bytes_total: int = 0  # bytes accepted from clients (cache or write-around)
    backend_client_bytes_total: int = 0  # backend traffic caused by clients, not flushes
    writearound_bytes_total: int = 0
    slowdowns_total: int = 0
    forced_flush_bytes_total: int = 0  # flushed in phase 1 only to make room


class Claim:
    """Space reserved on one volume for one file being written, in the order of arrival."""

    __slots__ = ("give_up", "order", "reserved", "vol", "waiting", "want")

    def __init__(self, vol: Volume, order: int) -> None:
        self.vol = vol
        self.order = order
        self.reserved = 0
        self.want = 0  # the amount it waits for
        self.waiting = False
        self.give_up = False


class Fill:
    """A read-through copy in progress; any mutation of its key makes it stale."""

    __slots__ = ("stale",)

    def __init__(self) -> None:
        self.stale = False


class CacheStore:
    def __init__(self, settings: CacheSettings, index_path: Path) -> None:
        self.settings = settings
        self.sync = settings.durability == "fsync"
        self.stats = Stats()
        self.keys = KeyLocks()
        self.volumes: dict[str, Volume] = {}
        self.uploads: dict[str, Upload] = {}
        self.parts: dict[str, dict[int, Part]] = {}
        self.space_waiters = 0
        self.drain_requests = 0
        self.urgent: set[BK] = set()
        #: backend multipart uploads opened by the flusher: upload id -> (bucket, key)
        self.flush_uploads: dict[str, BK] = {}
        #: keys whose flusher upload is being created (its id is not known yet)
        self.flush_creating: Counter[BK] = Counter()
        self._index_path = index_path
        #: keys whose last index write was unsynced -> the number of that write
        self._unsynced: dict[BK, int] = {}
        self._writes = 0
        self._index: Index | None = None
        self._lock = threading.Lock()
        self._records = Records()
        self._lru: OrderedDict[BK, None] = OrderedDict()
        self._heap: list[tuple[int, str, str]] = []
        self._pins: Counter[FileId] = Counter()
        self._doomed: dict[FileId, int] = {}
        self._fills: dict[BK, set[Fill]] = {}
        self._seq = 0
        self._claims = 0
        self._event = asyncio.Event()

    # -- lifecycle ---------------------------------------------------------------------
    async def open(self, extra_volumes: Iterable[tuple[Path, int]] = ()) -> list[Volume]:
        """Open volumes (the configured ones, then ``extra_volumes`` (path, capacity):
        elastic volumes found attached) and the index, drop records whose files are
        gone, sweep orphans. Returns the extra volumes, opened."""
        extra: list[Volume] = []
        for path, capacity in [*((v.path, v.capacity_bytes) for v in self.settings.volumes),
                               *extra_volumes]:
            vol = await run_cache_blocking(open_volume, path, capacity)
            self.volumes[vol.id] = vol
            extra.append(vol)
        extra = extra[len(self.settings.volumes):]
        self._index = await run_cache_blocking(Index, self._index_path)
        contents = await run_cache_blocking(self._index.load)
        self._seq = contents.seq
        self.flush_uploads = dict(contents.flush_uploads)
        drop = Batch()
        # Inline segments have no file to check: their bytes came with the record. One
        # charged to a volume that is gone is charged to the roomiest volume instead.
        home = max(self.volumes.values(), key=lambda v: v.free, default=None)

        def rehomed(seg: Segment) -> Segment | None:
            if seg.inline is None or seg.volume in self.volumes:
                return seg
            return replace(seg, volume=home.id) if home is not None else None

        for entry in contents.entries:
            moved = [rehomed(s) for s in entry.segments]
            segments = tuple(s for s in moved if s is not None)
            if len(segments) < len(moved) or not await self._files_present(
                    s for s in segments if s.inline is None):
                if entry.dirty:
                    raise ServiceUnavailable(
                        f"cache data of unflushed object {entry.bucket}/{entry.key} is "
                        "missing (volume removed or durability='none' after a crash)")
                drop.delete_entry(entry.bucket, entry.key)
                continue
            if segments != entry.segments:
                entry = replace(entry, segments=segments)
                drop.put_entry(entry)
            if entry.state is EntryState.FLUSHING:
                entry = replace(entry, state=EntryState.DIRTY)
            self._install(entry)
        for upload in contents.uploads:
            parts = contents.parts.pop(upload.upload_id, [])
            present: list[Part] = []
            for part in parts:
                seg = rehomed(part.segment)
                if seg is None or (seg.inline is None and not await self._files_present(
                        (seg,))):
                    continue
                if seg != part.segment:
                    part = replace(part, segment=seg)
                    drop.put_part(upload.upload_id, part)
                present.append(part)
            self.uploads[upload.upload_id] = upload
            self.parts[upload.upload_id] = {p.part_number: p for p in present}
        for upload_id, parts in contents.parts.items():  # parts of vanished uploads
            drop.delete_upload(upload_id, [p.part_number for p in parts])
        if drop.deletes or drop.puts:
            await self._index.commit(drop, sync=self.sync)
        referenced: dict[str, set[str]] = {v: set() for v in self.volumes}
        for seg in self._all_segments():
            referenced[seg.volume].add(seg.file)
            self.volumes[seg.volume].used += charge(seg.size)
        for vol in self.volumes.values():
            removed = await run_cache_blocking(sweep, vol, referenced[vol.id])
            if removed:
                log.info("cache volume %s: removed %d orphaned files", vol.path, removed)
        return extra

    # -- volumes attached and detached at run time (elastic capacity) -----------------
    async def add_volume(self, path: Path, capacity: int) -> Volume:
        """Open a new, empty volume and start using it."""
        vol = await run_cache_blocking(open_volume, path, capacity)
        self.volumes[vol.id] = vol
        self.changed()
        return vol

    def volume_idle(self, vol: Volume) -> bool:
        """True when nothing on ``vol`` is needed any more: no unflushed record or
        multipart part has data there, no write is in progress there and no reader or
        flush holds one of its files."""
        with self._lock:
            if vol.claims or vol.inflight or any(f[0] == vol.id for f in self._pins):
                return False
            for entry in self._records.dirty():
                if any(s.volume == vol.id for s in entry.segments):
                    return False
            return not any(p.segment.volume == vol.id for parts in self.parts.values()
                           for p in parts.values())

    async def remove_volume(self, vol: Volume) -> bool:
        """Forget ``vol`` once :meth:`volume_idle`: its clean records are dropped (the
        backend has them) with one synced index write. False (nothing changed) if it is
        not idle or a record on it is locked right now. The files stay for the caller."""
        if not self.volume_idle(vol):
            return False
        victims: list[Entry] = []
        with self._lock:
            victims.extend(e for e in self._records.values()
                           if any(s.volume == vol.id for s in e.segments))
        locked: list[Entry] = []
        try:
            for entry in victims:
                if not self.keys.try_acquire(entry.bk):
                    return False
                locked.append(entry)
            if not self.volume_idle(vol) or any(self.get(*e.bk) is not e for e in victims):
                return False
            batch = Batch()
            for entry in victims:
                batch.delete_entry(entry.bucket, entry.key)
            await asyncio.shield(self.index.commit(batch.set_seq(self._seq),
                                              sync=self.sync))
            with self._lock:
                for entry in victims:  # clean: dropping them is always safe
                    self._replace(entry.bk, None)
            for entry in victims:
                self.invalidate_fills(entry.bk)
            # A write may have started on the volume during the index write (when no
            # other volume takes writes): then it stays. No await from here to the end.
            if not self.volume_idle(vol):
                return False
            del self.volumes[vol.id]
        finally:
            for entry in locked:
                self.keys.release(entry.bk)
        self.changed()
        return True

    async def _files_present(self, segments: Iterable[Segment]) -> bool:
        for seg in segments:
            vol = self.volumes.get(seg.volume)
            if vol is None or not await run_cache_blocking(file_ok, vol, seg.file, seg.size):
                return False
        return True

    def _all_segments(self) -> Iterable[Segment]:
        for entry in self._records.values():
            yield from entry.segments
        for parts in self.parts.values():
            for part in parts.values():
                yield part.segment

    async def close(self) -> None:
        if self._index is not None:
            await run_cache_blocking(self._index.close)
            self._index = None

    @property
    def opened(self) -> bool:
        return self._index is not None

    @property
    def index(self) -> Index:
        if self._index is None:
            raise ServiceUnavailable("the cache tier is not started")
        return self._index

    # -- change notification -----------------------------------------------------------
    @property
    def event(self) -> asyncio.Event:
        """An event set at the next state change (take it, re-check, then wait)."""
        return self._event

    def changed(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait_change(self, timeout: float | None,
                          event: asyncio.Event | None = None) -> None:
        """Wait for the next change (or ``event``, taken earlier) at most ``timeout`` s."""
        await wait_event(event or self._event, timeout)

    # -- records -----------------------------------------------------------------------
    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    @property
    def last_seq(self) -> int:
        """The last sequence number drawn: every record so far has one up to it."""
        return self._seq

    @property
    def records(self) -> Records:
        """The indexed records, for listing cursors and flush watches. Use it on the event
        loop's thread only (records change there; the lock is for the metrics thread)."""
        return self._records

    def get(self, bucket: str, key: str) -> Entry | None:
        return self._records.get(bucket, key)

    def entries_of(self, bucket: str) -> Mapping[str, Entry]:
        """The records of ``bucket`` in key order (live: copy before awaiting)."""
        return self._records.of(bucket)

    @property
    def dirty_bytes(self) -> int:
        return self._records.dirty_bytes

    @property
    def dirty_count(self) -> int:
        return self._records.dirty_count

    def dirty_entries(self, bucket: str | None = None) -> list[Entry]:
        """The unflushed records (of ``bucket``): O(their number), not of all records."""
        with self._lock:
            return list(self._records.dirty(bucket))

    def touch(self, bk: BK) -> None:
        with self._lock:
            if bk in self._lru:
                self._lru.move_to_end(bk)

    def _install(self, entry: Entry) -> Entry | None:
        return self._replace(entry.bk, entry)

    def _replace(self, bk: BK, new: Entry | None) -> Entry | None:
        """Swap the record of ``bk`` (caller holds ``self._lock``): the one place where
        records, their indexes (records.py), the LRU and the flush heap change."""
        old = self._records.swap(bk, new)
        self._lru.pop(bk, None)
        if new is not None:
            if not new.dirty:
                self._lru[bk] = None
            elif new.state is EntryState.DIRTY:
                heapq.heappush(self._heap, (new.seq, bk[0], bk[1]))
        return old

    def set_memory(self, bk: BK, new: Entry | None) -> Entry | None:
        with self._lock:
            return self._replace(bk, new)

    async def commit(self, bk: BK, new: Entry | None, *, sync: bool,
                     batch: Batch | None = None) -> Entry | None:
        """Write ``new`` (None: remove) for ``bk`` to the index, then to memory; discard
        the previous record's files. The caller holds the key lock of ``bk``."""
        assert self.keys.locked(bk)
        batch = batch or Batch()
        if new is not None:
            batch.put_entry(new)
        else:
            batch.delete_entry(*bk)
        batch.set_seq(self._seq)
        # Concurrent synced commits share one WAL sync (group commit); memory changes
        # only once the write returned.
        await self._write(batch, sync, (bk,))
        old = self.set_memory(bk, new)
        self.invalidate_fills(bk)
        if old is not None:
            keep = set(new.segments) if new is not None else set()
            gone = [s for s in old.segments if s not in keep]
            with self._lock:  # an inline segment has no file: only its space goes back
                for seg in gone:
                    if seg.inline is not None and seg.volume in self.volumes:
                        self.volumes[seg.volume].used -= charge(seg.size)
            await self.discard([s for s in gone if s.inline is None])
        self.changed()
        return old

    async def barrier(self) -> None:
        """A durable (per settings) index write: earlier unsynced writes become durable."""
        await self._write(Batch().set_seq(self._seq), self.sync, ())

    def unsynced(self, bk: BK) -> bool:
        """Whether an index write of ``bk`` may not be durable yet (a barrier is due
        before anything that relies on it, such as a write past the cache)."""
        return bk in self._unsynced

    async def _write(self, batch: Batch, sync: bool, keys: Iterable[BK]) -> None:
        """Write ``batch``; an unsynced write marks ``keys`` until a later synced write
        (which makes every earlier WAL entry durable) has returned."""
        self._writes += 1
        mark = self._writes
        await self.index.commit(batch, sync=sync)
        if not sync:
            if self.sync:  # (with durability "none" nothing is ever synced: no barrier)
                for bk in keys:
                    self._unsynced[bk] = mark
        elif self._unsynced:
            self._unsynced = {k: m for k, m in self._unsynced.items() if m > mark}

    def take_dirty(self, ready: Callable[[Entry], bool]) -> Entry | None:
        """The oldest DIRTY record ``ready`` accepts, switched to FLUSHING (memory only)."""
        with self._lock:
            aside: list[tuple[int, str, str]] = []
            found: Entry | None = None
            while self._heap:
                item = heapq.heappop(self._heap)
                entry = self._records.get(item[1], item[2])
                if entry is None or entry.seq != item[0] or entry.state is not EntryState.DIRTY:
                    continue  # stale heap item
                if ready(entry):
                    found = replace(entry, state=EntryState.FLUSHING)
                    self._replace(entry.bk, found)
                    break
                aside.append(item)
            for item in aside:
                heapq.heappush(self._heap, item)
            return found

    def take_specific(self, entry: Entry) -> Entry | None:
        """Switch ``entry`` to FLUSHING if it is still the current DIRTY record."""
        with self._lock:
            if self.get(*entry.bk) is not entry or entry.state is not EntryState.DIRTY:
                return None
            found = replace(entry, state=EntryState.FLUSHING)
            self._replace(entry.bk, found)
            return found

    def oldest_dirty_since(self) -> float | None:
        """When the oldest unflushed record became so: O(1)."""
        with self._lock:
            return self._records.oldest_dirty_since()

    # -- read-through fills ------------------------------------------------------------
    def register_fill(self, bk: BK) -> Fill:
        fill = Fill()
        self._fills.setdefault(bk, set()).add(fill)
        return fill

    def unregister_fill(self, bk: BK, fill: Fill) -> None:
        fills = self._fills.get(bk)
        if fills is not None:
            fills.discard(fill)
            if not fills:
                del self._fills[bk]

    def invalidate_fills(self, bk: BK) -> None:
        for fill in self._fills.get(bk, ()):
            fill.stale = True

    # -- files and pins ----------------------------------------------------------------
    def pin(self, segments: Iterable[Segment]) -> None:
        with self._lock:
            for seg in segments:
                self._pins[(seg.volume, seg.file)] += 1

    async def unpin(self, segments: Iterable[Segment]) -> None:
        free: list[Segment] = []
        with self._lock:
            for seg in segments:
                fid = (seg.volume, seg.file)
                self._pins[fid] -= 1
                if self._pins[fid] <= 0:
                    del self._pins[fid]
                    if fid in self._doomed:
                        del self._doomed[fid]
                        free.append(seg)
        await self._unlink(free)

    async def discard(self, segments: Iterable[Segment]) -> None:
        """Delete files no record references any more (deferred while pinned)."""
        free: list[Segment] = []
        with self._lock:
            for seg in segments:
                fid = (seg.volume, seg.file)
                if self._pins.get(fid):
                    self._doomed[fid] = seg.size
                else:
                    free.append(seg)
        await self._unlink(free)

    async def _unlink(self, segments: list[Segment]) -> None:
        if not segments:
            return

        def remove() -> None:
            for seg in segments:
                unlink(self.volumes[seg.volume], seg.file)

        try:
            await asyncio.shield(run_cache_blocking(remove))
        finally:
            with self._lock:
                for seg in segments:
                    self.volumes[seg.volume].used -= charge(seg.size)
            self.changed()

    # -- space -------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return sum(v.capacity for v in self.volumes.values())

    @property
    def used(self) -> int:
        return sum(v.used for v in self.volumes.values())

    @property
    def max_object(self) -> int:
        """Largest payload a single data file can hold."""
        return max((v.capacity - charge(0) for v in self.volumes.values()), default=0)

    @property
    def active_volumes(self) -> list[Volume]:
        """Volumes new files may be written to (not draining before a detach)."""
        return [v for v in self.volumes.values() if not v.retiring]

    def choose_volume(self) -> Volume:
        """The active volume with the most free space (a retiring one if no other)."""
        candidates = self.active_volumes or list(self.volumes.values())
        if not candidates:
            raise ServiceUnavailable("no cache volume is attached")
        return max(candidates, key=lambda v: v.free)

    def open_claim(self, vol: Volume) -> Claim:
        """Start reserving space on ``vol`` for one file being written."""
        self._claims += 1
        claim = Claim(vol, self._claims)
        vol.claims.add(claim)
        return claim

    def _try_reserve(self, claim: Claim, amount: int) -> bool:
        vol = claim.vol
        with self._lock:
            if vol.used + amount <= vol.capacity:
                vol.used += amount
                vol.inflight += amount
                claim.reserved += amount
                return True
            return False

    def settle(self, claim: Claim) -> None:
        """The claimed bytes now belong to a committed file (freed when it is deleted)."""
        with self._lock:
            claim.vol.inflight -= claim.reserved
            claim.reserved = 0
            claim.vol.claims.discard(claim)

    def drop_claim(self, claim: Claim) -> None:
        """Give the claimed bytes back (the file was not committed)."""
        with self._lock:
            claim.vol.used -= claim.reserved
            claim.vol.inflight -= claim.reserved
            claim.reserved = 0
            claim.vol.claims.discard(claim)
        self.changed()

    def _break_deadlock(self, vol: Volume) -> None:
        """If every writer on ``vol`` waits and no committed data there could ever be
        flushed or evicted to make room, the youngest writers give up (SlowDown, or a
        diversion to the backend) until the oldest one can go on."""
        if vol.used - vol.inflight > 0 or not vol.claims:
            return
        if not all(c.waiting or c.give_up for c in vol.claims):
            return
        by_age = sorted(vol.claims, key=lambda c: c.order)
        need = by_age[0].want - vol.free
        for claim in reversed(by_age[1:]):
            if need <= 0:
                break
            if not claim.give_up:
                claim.give_up = True
                need -= claim.reserved

    async def reserve(self, claim: Claim, amount: int, *, wait: bool,
                      retry_after: Callable[[], float] | None = None) -> None:
        """Charge ``amount`` more bytes to ``claim``: evict clean data, then (``wait``)
        wait up to the backpressure timeout for the flusher to make room, then SlowDown."""
        vol = claim.vol
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.backpressure_timeout_s
        while True:
            if self._try_reserve(claim, amount):
                return
            if await self.evict(vol, amount):
                continue
            remaining = deadline - loop.time()
            if not wait or remaining <= 0 or claim.give_up or claim.reserved + amount \
                    > vol.capacity:
                hint = retry_after() if retry_after else 1.0
                raise SlowDown("the cache is full of data not yet written to the backend",
                               retry_after=max(1, min(60, math.ceil(hint))))
            self.space_waiters += 1
            claim.waiting = True
            claim.want = amount
            try:
                self._break_deadlock(vol)
                self.changed()  # wake the flusher (room is needed) and given-up writers
                event = self._event
                if claim.give_up:
                    continue
                if self._try_reserve(claim, amount):
                    return
                await wait_event(event, remaining)
            finally:
                claim.waiting = False
                self.space_waiters -= 1

    async def evict(self, vol: Volume, amount: int) -> bool:
        """Evict least recently used CLEAN records with files on ``vol`` until ``amount``
        bytes would fit; False if nothing could be evicted."""
        victims: list[Entry] = []
        with self._lock:
            need = amount - vol.free
            for bk in self._lru:  # least recently used first; no copy of the whole LRU
                if need <= 0:
                    break
                entry = self._records.get(*bk)
                assert entry is not None
                local = [s for s in entry.segments if s.volume == vol.id]
                if not local:
                    continue  # (files being read are freed when their readers close)
                if not self.keys.try_acquire(bk):
                    continue
                victims.append(entry)
                need -= sum(charge(s.size) for s in local)
            for entry in victims:
                self._replace(entry.bk, None)
        if not victims:
            return False
        try:
            batch = Batch()
            for entry in victims:
                batch.delete_entry(entry.bucket, entry.key)
            await asyncio.shield(self._write(batch, False, (e.bk for e in victims)))
            for entry in victims:
                self.invalidate_fills(entry.bk)
            await self.discard([s for e in victims for s in e.segments])
            self.stats.evictions += len(victims)
        finally:
            for entry in victims:
                self.keys.release(entry.bk)
        return True

    def now(self) -> float:
        return time.time()
