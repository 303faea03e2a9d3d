"""The space manager: the cache volumes and the bytes on them.

It attaches and detaches volumes, reserves room for files being written (claims, with
backpressure), evicts clean records to make room, and defers deleting a file while a
reader pins it. Records themselves belong to the record index
(:class:`~gateway.cache.store.CacheStore`, which owns one space manager); the space
manager sees them through the narrow :class:`Occupants` protocol.

Rules:

* ``Volume.used`` counts committed files (also those still being read after their record
  went away) and reserved bytes; ``Volume.inflight`` the reserved ones. Both change only
  under the lock shared with the record index, which does no I/O.
* A data file is unlinked only when no record references it and no reader pins it; until
  then its bytes stay charged to its volume.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from backends.core.blocking import run_cache_blocking
from backends.core.errors import ServiceUnavailable, SlowDown
from gateway.cache.changes import Changes
from gateway.cache.entry import Entry, Segment
from gateway.cache.keylock import KeyLocks
from gateway.cache.settings import CacheSettings
from gateway.cache.stats import Stats
from gateway.cache.volumes import Volume, charge, file_ok, open_volume, sweep, unlink

log = logging.getLogger(__name__)

FileId = tuple[str, str]  # (volume id, file name)


class Occupants(Protocol):
    """The records whose data occupy the volumes, as the space manager needs them to
    evict clean data and to detach a volume (implemented by the record index). Methods
    marked "under the lock" are called with the shared lock held and do no I/O."""

    @property
    def keys(self) -> KeyLocks:
        """The key locks: a record is only dropped while its key is held."""
        ...

    def unflushed_on(self, vol_id: str) -> bool:
        """Whether an unflushed record or a multipart part has data on ``vol_id`` (under
        the lock)."""
        ...

    def dirty_on(self, vol_id: str) -> bool:
        """Whether an unflushed record (not a multipart part: the flusher can make room
        by flushing it) has data on ``vol_id`` (under the lock)."""
        ...

    def evictable(self) -> Iterator[Entry]:
        """The clean records, least recently used first (under the lock)."""
        ...

    def records_on(self, vol_id: str) -> Iterator[Entry]:
        """Every record with data on ``vol_id`` (under the lock)."""
        ...

    def current(self, entry: Entry) -> bool:
        """Whether ``entry`` is still the record of its key."""
        ...

    def forget(self, entries: Iterable[Entry]) -> None:
        """Take ``entries`` (key-locked by the caller) out of memory (under the lock)."""
        ...

    async def write_removal(self, entries: Sequence[Entry], *, durable: bool) -> None:
        """Delete the records of ``entries`` (key-locked by the caller) from the index:
        durable per the settings, or unsynced (a later barrier makes it durable)."""
        ...


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


class SpaceManager:
    """The volumes (``volumes``: id -> Volume), claims, eviction and pins.

    ``lock`` is the record index's lock (records and the bytes charged for them change
    together); ``changes`` is told when room is freed and waited on for room;
    ``occupants`` are the records; ``stats`` counts evictions.
    """

    def __init__(self, settings: CacheSettings, occupants: Occupants, *,
                 lock: threading.Lock, changes: Changes, stats: Stats) -> None:
        self.settings = settings
        self.volumes: dict[str, Volume] = {}
        #: writers waiting for room now (the flusher then flushes at full concurrency)
        self.waiters = 0
        self._occupants = occupants
        self._lock = lock
        self._changes = changes
        self._stats = stats
        self._pins: Counter[FileId] = Counter()
        self._doomed: dict[FileId, int] = {}
        self._claims = 0
        #: bytes of evicted records, per volume id, whose files are being deleted now
        self._freeing: Counter[str] = Counter()

    # -- volumes -----------------------------------------------------------------------
    async def open_volumes(self, specs: Iterable[tuple[Path, int]]) -> list[Volume]:
        """Open (or create) the volumes ``specs`` (path, capacity) and use them."""
        opened: list[Volume] = []
        for path, capacity in specs:
            vol = await run_cache_blocking(open_volume, path, capacity)
            self.volumes[vol.id] = vol
            opened.append(vol)
        return opened

    async def files_present(self, segments: Iterable[Segment]) -> bool:
        """Whether the data file of every one of ``segments`` is there, whole."""
        for seg in segments:
            vol = self.volumes.get(seg.volume)
            if vol is None or not await run_cache_blocking(file_ok, vol, seg.file, seg.size):
                return False
        return True

    async def adopt(self, segments: Iterable[Segment]) -> None:
        """At start: charge ``segments`` (all the index references) to their volumes and
        delete every other file there (orphans of a crash)."""
        referenced: dict[str, set[str]] = {v: set() for v in self.volumes}
        for seg in segments:
            referenced[seg.volume].add(seg.file)
            self.volumes[seg.volume].used += charge(seg.size)
        for vol in self.volumes.values():
            removed = await run_cache_blocking(sweep, vol, referenced[vol.id])
            if removed:
                log.info("cache volume %s: removed %d orphaned files", vol.path, removed)

    async def add_volume(self, path: Path, capacity: int) -> Volume:
        """Open a new, empty volume and start using it."""
        vol = await run_cache_blocking(open_volume, path, capacity)
        self.volumes[vol.id] = vol
        self._changes.changed()
        return vol

    def volume_idle(self, vol: Volume) -> bool:
        """True when nothing on ``vol`` is needed any more: no unflushed record or
        multipart part has data there, no write is in progress there and no reader or
        flush holds one of its files."""
        with self._lock:
            if vol.claims or vol.inflight or any(f[0] == vol.id for f in self._pins):
                return False
            return not self._occupants.unflushed_on(vol.id)

    async def remove_volume(self, vol: Volume) -> bool:
        """Forget ``vol`` once :meth:`volume_idle`: its clean records are dropped (the
        backend has them) with one durable index write. False (nothing changed) if it is
        not idle or a record on it is locked right now. The files stay for the caller."""
        if not self.volume_idle(vol):
            return False
        occupants = self._occupants
        with self._lock:
            victims = list(occupants.records_on(vol.id))
        locked: list[Entry] = []
        try:
            for entry in victims:
                if not occupants.keys.try_acquire(entry.bk):
                    return False
                locked.append(entry)
            if not self.volume_idle(vol) or not all(occupants.current(e) for e in victims):
                return False
            await asyncio.shield(occupants.write_removal(victims, durable=True))
            with self._lock:  # clean: dropping them is always safe
                occupants.forget(victims)
            # A write may have started on the volume during the index write (when no
            # other volume takes writes): then it stays. No await from here to the end.
            if not self.volume_idle(vol):
                return False
            del self.volumes[vol.id]
        finally:
            for entry in locked:
                occupants.keys.release(entry.bk)
        self._changes.changed()
        return True

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

    # -- totals ------------------------------------------------------------------------
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

    # -- claims ------------------------------------------------------------------------
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
                vol.peak = max(vol.peak, vol.used)
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
        self._changes.changed()

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
                      wait_for_flushes: bool = False,
                      retry_after: Callable[[], float] | None = None) -> None:
        """Charge ``amount`` more bytes to ``claim``: evict clean data, then (``wait``)
        wait up to the backpressure timeout for the flusher to make room, then SlowDown.
        ``wait_for_flushes``: wait too (without ``wait``) while an unflushed record on
        the volume can still make room, SlowDown at once when none can."""
        vol = claim.vol
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.backpressure_timeout_s
        while True:
            if self._try_reserve(claim, amount):
                return
            if await self.evict(vol, amount):
                continue
            remaining = deadline - loop.time()
            if (self._freeing[vol.id] > 0 and remaining > 0 and not claim.give_up
                    and claim.reserved + amount <= vol.capacity):
                # Another writer's eviction is freeing room here right now (its records
                # are gone, its files not yet): wait for it rather than be refused or
                # diverted past a cache that has room in a moment.
                await self._changes.wait(remaining, self._changes.event)
                continue
            if wait_for_flushes and not wait:
                with self._lock:
                    flushable = self._occupants.dirty_on(vol.id)
            else:
                flushable = False
            if not (wait or flushable) or remaining <= 0 or claim.give_up \
                    or claim.reserved + amount > vol.capacity:
                hint = retry_after() if retry_after else 1.0
                raise SlowDown("the cache is full of data not yet written to the backend",
                               retry_after=max(1, min(60, math.ceil(hint))), public=True)
            self.waiters += 1
            claim.waiting = True
            claim.want = amount
            try:
                self._break_deadlock(vol)
                self._changes.changed()  # wake the flusher (room is needed) and given-up writers
                event = self._changes.event
                if claim.give_up:
                    continue
                if self._try_reserve(claim, amount):
                    return
                await self._changes.wait(remaining, event)
            finally:
                claim.waiting = False
                self.waiters -= 1

    # -- eviction ----------------------------------------------------------------------
    async def evict(self, vol: Volume, amount: int) -> bool:
        """Evict least recently used CLEAN records with files on ``vol`` until ``amount``
        bytes would fit; False if nothing could be evicted. Until their files are
        deleted, the bytes are counted as being freed on ``vol`` (:meth:`reserve` waits
        for them)."""
        occupants = self._occupants
        victims: list[Entry] = []
        freeing = 0
        with self._lock:
            need = amount - vol.free
            for entry in occupants.evictable():  # no copy of the whole LRU
                if need <= 0:
                    break
                local = [s for s in entry.segments if s.volume == vol.id]
                if not local:
                    continue  # (files being read are freed when their readers close)
                if not occupants.keys.try_acquire(entry.bk):
                    continue
                victims.append(entry)
                freeing += sum(charge(s.size) for s in local)
                need -= sum(charge(s.size) for s in local)
            occupants.forget(victims)
            if victims:
                self._freeing[vol.id] += freeing
        if not victims:
            return False
        try:
            await asyncio.shield(occupants.write_removal(victims, durable=False))
            await self.discard([s for e in victims for s in e.segments])
            self._stats.evictions += len(victims)
        finally:
            with self._lock:
                self._freeing[vol.id] -= freeing
                if self._freeing[vol.id] <= 0:
                    del self._freeing[vol.id]
            for entry in victims:
                occupants.keys.release(entry.bk)
            self._changes.changed()  # (waiters look again, also if a file stayed pinned)
        return True

    # -- files and pins ----------------------------------------------------------------
    def pin(self, segments: Iterable[Segment]) -> None:
        """Keep the files of ``segments`` on disk (being read) until :meth:`unpin`."""
        with self._lock:
            for seg in segments:
                self._pins[(seg.volume, seg.file)] += 1

    async def unpin(self, segments: Iterable[Segment]) -> None:
        """Release a :meth:`pin`; files discarded meanwhile are deleted now."""
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

    async def release(self, segments: Sequence[Segment]) -> None:
        """Give back the space of ``segments`` no record references any more: an inline
        one's at once (it has no file), a data file's once it is deleted."""
        with self._lock:
            for seg in segments:
                if seg.inline is not None and seg.volume in self.volumes:
                    self.volumes[seg.volume].used -= charge(seg.size)
        await self.discard([s for s in segments if s.inline is None])

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
            self._changes.changed()
