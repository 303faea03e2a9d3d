"""The record index: the cache's index records mirrored in memory, index commits, dirty
tracking, read-through fills, key locks, the multipart uploads held in the cache and what
the flusher is asked for. It owns the space manager (``space``: volumes, claims,
eviction, pins; :mod:`gateway.cache.space`).

Rules that keep memory, RocksDB and the volumes consistent:

* Every index write that touches an object key happens while holding that key's lock
  (:attr:`CacheStore.keys`), after re-validating the in-memory record under it.
* In-memory records change only inside ``with self._lock`` blocks that do no I/O (the
  lock is a ``threading.Lock`` because metrics are scraped from another thread; the space
  manager shares it).
* A data file is unlinked only when no record references it and no reader pins it;
  until then its bytes stay charged to its volume. Files no record references are
  swept on start.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from backends.core.blocking import run_cache_blocking
from backends.core.errors import ServiceUnavailable
from gateway.cache.changes import Changes
from gateway.cache.entry import Entry, EntryState, Part, Segment, Upload
from gateway.cache.index import Batch, Index
from gateway.cache.keylock import KeyLocks
from gateway.cache.records import Records
from gateway.cache.settings import CacheSettings
from gateway.cache.space import SpaceManager
from gateway.cache.stats import Stats
from gateway.cache.volumes import Volume

BK = tuple[str, str]

_NO_PARTS: Mapping[int, Part] = MappingProxyType({})


class Fill:
    """A read-through copy in progress; any mutation of its key makes it stale."""

    __slots__ = ("stale",)

    def __init__(self) -> None:
        self.stale = False


class CacheStore:
    """The records of the cache (see the module docstring) and its space manager."""

    def __init__(self, settings: CacheSettings, index_path: Path) -> None:
        self.settings = settings
        self.sync = settings.durability == "fsync"
        self.stats = Stats()
        self.keys = KeyLocks()
        #: the multipart uploads held in the cache, and their cached parts by number
        self._uploads: dict[str, Upload] = {}
        self._parts: dict[str, dict[int, Part]] = {}
        self._part_bytes = 0  # the sum of the sizes in _parts, kept as they change
        #: drains in progress (flush at full speed while there is one)
        self._drains = 0
        #: keys to flush before the others
        self._urgent: set[BK] = set()
        #: called with each key whose record a flush made clean (or removed, a deletion)
        self._flushed_listeners: list[Callable[[BK], None]] = []
        #: backend multipart uploads the cache opened and hides from listings (the
        #: flusher's, and orphans of cached uploads): upload id -> (bucket, key)
        self._flush_uploads: dict[str, BK] = {}
        #: keys whose backend upload is being created (its id is not known yet)
        self._creating: Counter[BK] = Counter()
        self._index_path = index_path
        #: keys whose last index write was unsynced -> the number of that write
        self._unsynced: dict[BK, int] = {}
        self._writes = 0
        self._index: Index | None = None
        self._lock = threading.Lock()
        self._records = Records()
        self._lru: OrderedDict[BK, None] = OrderedDict()
        self._heap: list[tuple[int, str, str]] = []
        self._fills: dict[BK, set[Fill]] = {}
        self._seq = 0
        self._changes = Changes()
        #: the volumes and the bytes on them
        self.space = SpaceManager(settings, self, lock=self._lock, changes=self._changes,
                                  stats=self.stats)

    # -- lifecycle ---------------------------------------------------------------------
    async def open(self, extra_volumes: Iterable[tuple[Path, int]] = ()) -> list[Volume]:
        """Open volumes (the configured ones, then ``extra_volumes`` (path, capacity):
        elastic volumes found attached) and the index, drop records whose files are
        gone, sweep orphans. Returns the extra volumes, opened."""
        space = self.space
        opened = await space.open_volumes(
            [*((v.path, v.capacity_bytes) for v in self.settings.volumes), *extra_volumes])
        extra = opened[len(self.settings.volumes):]
        self._index = await run_cache_blocking(Index, self._index_path)
        contents = await run_cache_blocking(self._index.load)
        self._seq = contents.seq
        self._flush_uploads = dict(contents.flush_uploads)
        drop = Batch()
        # Inline segments have no file to check: their bytes came with the record. One
        # charged to a volume that is gone is charged to the roomiest volume instead.
        home = max(space.volumes.values(), key=lambda v: v.free, default=None)

        def rehomed(seg: Segment) -> Segment | None:
            if seg.inline is None or seg.volume in space.volumes:
                return seg
            return replace(seg, volume=home.id) if home is not None else None

        for entry in contents.entries:
            moved = [rehomed(s) for s in entry.segments]
            segments = tuple(s for s in moved if s is not None)
            if len(segments) < len(moved) or not await space.files_present(
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
                if seg is None or (seg.inline is None and not await space.files_present(
                        (seg,))):
                    continue
                if seg != part.segment:
                    part = replace(part, segment=seg)
                    drop.put_part(upload.upload_id, part)
                present.append(part)
            self._uploads[upload.upload_id] = upload
            self._parts[upload.upload_id] = {p.part_number: p for p in present}
            self._part_bytes += sum(p.size for p in present)
        for upload_id, parts in contents.parts.items():  # parts of vanished uploads
            drop.delete_upload(upload_id, [p.part_number for p in parts])
        if drop.deletes or drop.puts:
            await self._index.commit(drop, sync=self.sync)
        await space.adopt(self._all_segments())
        return extra

    def _all_segments(self) -> Iterable[Segment]:
        for entry in self._records.values():
            yield from entry.segments
        for parts in self._parts.values():
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
        return self._changes.event

    def changed(self) -> None:
        """Wake everything waiting for a change (writers, the flusher, drains)."""
        self._changes.changed()

    async def wait_change(self, timeout: float | None,  # noqa: ASYNC109  bounded wait by design
                          event: asyncio.Event | None = None) -> None:
        """Wait for the next change (or ``event``, taken earlier) at most ``timeout`` s."""
        await self._changes.wait(timeout, event)

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
            await self.space.release([s for s in old.segments if s not in keep])
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

    # -- multipart uploads held in the cache -------------------------------------------
    # Their records are written to the index by the callers first (under the upload's
    # key lock); these change memory only.
    def upload(self, upload_id: str) -> Upload | None:
        """The cached upload ``upload_id``, None if it is not held here."""
        return self._uploads.get(upload_id)

    def uploads_in(self, bucket: str | None = None, prefix: str = "") -> list[Upload]:
        """The cached uploads (of ``bucket``, keys starting with ``prefix``), as they are
        now."""
        return [u for u in self._uploads.values()
                if (bucket is None or u.bucket == bucket) and u.key.startswith(prefix)]

    def add_upload(self, upload: Upload) -> None:
        """Hold a new upload, with no part yet."""
        self._uploads[upload.upload_id] = upload
        self._parts[upload.upload_id] = {}

    def update_upload(self, upload: Upload) -> None:
        """Replace the record of a held upload."""
        self._uploads[upload.upload_id] = upload

    def drop_upload(self, upload_id: str) -> dict[int, Part]:
        """Forget a held upload; returns its cached parts (the caller discards their
        files)."""
        del self._uploads[upload_id]
        parts = self._parts.pop(upload_id)
        self._part_bytes -= sum(p.size for p in parts.values())
        return parts

    def parts_of(self, upload_id: str) -> Mapping[int, Part]:
        """The cached parts of an upload by number (live: copy before awaiting); empty
        for an upload not held."""
        return self._parts.get(upload_id, _NO_PARTS)

    def record_part(self, upload_id: str, part: Part) -> Part | None:
        """Hold ``part`` of a held upload; returns the part of that number it replaces."""
        parts = self._parts[upload_id]
        old = parts.get(part.part_number)
        parts[part.part_number] = part
        self._part_bytes += part.size - (old.size if old is not None else 0)
        return old

    def forget_part(self, upload_id: str, part_number: int) -> Part | None:
        """Forget a cached part (moved to the backend upload); returns it."""
        old = self._parts[upload_id].pop(part_number, None)
        if old is not None:
            self._part_bytes -= old.size
        return old

    @property
    def part_bytes(self) -> int:
        """Bytes of every cached part of every held upload."""
        return self._part_bytes

    # -- backend uploads the cache opened (hidden from listings) -----------------------
    def add_flush_upload(self, upload_id: str, bk: BK) -> None:
        """A backend upload of ``bk`` that the cache opened (a flush's, or an orphan to
        abort): listings hide it until :meth:`drop_flush_upload`."""
        self._flush_uploads[upload_id] = bk

    def drop_flush_upload(self, upload_id: str) -> None:
        self._flush_uploads.pop(upload_id, None)

    def is_flush_upload(self, upload_id: str) -> bool:
        return upload_id in self._flush_uploads

    def flush_uploads(self) -> list[tuple[str, BK]]:
        """Every backend upload the cache opened: (upload id, (bucket, key)), now."""
        return list(self._flush_uploads.items())

    @contextlib.contextmanager
    def creating_backend_upload(self, bk: BK) -> Iterator[None]:
        """While the block creates a backend upload of ``bk`` (its id is not known yet),
        listings hide the backend's uploads of the key."""
        creating = self._creating
        creating[bk] += 1
        try:
            yield
        finally:
            creating[bk] -= 1
            if not creating[bk]:
                del creating[bk]

    def creating_upload(self, bk: BK) -> bool:
        """Whether a backend upload of ``bk`` is being created."""
        return bk in self._creating

    def keys_creating_uploads(self, bucket: str) -> list[str]:
        """The keys of ``bucket`` whose backend upload is being created, now."""
        return [k for b, k in self._creating if b == bucket]

    # -- what the flusher is asked for -------------------------------------------------
    def make_urgent(self, *bks: BK) -> None:
        """Flush these keys before the others (the caller wakes the flusher)."""
        self._urgent.update(bks)

    def clear_urgent(self, bk: BK) -> None:
        self._urgent.discard(bk)

    def urgent_keys(self) -> list[BK]:
        """The keys to flush first, now."""
        return list(self._urgent)

    @property
    def any_urgent(self) -> bool:
        return bool(self._urgent)

    def begin_drain(self) -> None:
        """A drain starts: flush at full speed until its :meth:`end_drain`."""
        self._drains += 1

    def end_drain(self) -> None:
        self._drains -= 1

    @property
    def draining(self) -> bool:
        return self._drains > 0

    def on_flushed(self, listener: Callable[[BK], None]) -> None:
        """Call ``listener(bk)`` each time a flush makes a record clean (or removes it)."""
        self._flushed_listeners.append(listener)

    def flushed(self, bk: BK) -> None:
        """A flush made the record of ``bk`` clean (or removed it): tell the listeners."""
        for listener in self._flushed_listeners:
            listener(bk)

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

    # -- what the space manager sees of the records (space.Occupants) ------------------
    def unflushed_on(self, vol_id: str) -> bool:
        """Whether an unflushed record or a multipart part has data on ``vol_id``."""
        return self.dirty_on(vol_id) or any(
            p.segment.volume == vol_id for parts in self._parts.values()
            for p in parts.values())

    def dirty_on(self, vol_id: str) -> bool:
        """Whether an unflushed record (not a part) has data on ``vol_id``."""
        return any(any(s.volume == vol_id for s in entry.segments)
                   for entry in self._records.dirty())

    def evictable(self) -> Iterator[Entry]:
        """The clean records, least recently used first (caller holds the lock)."""
        for bk in self._lru:
            entry = self._records.get(*bk)
            assert entry is not None
            yield entry

    def records_on(self, vol_id: str) -> Iterator[Entry]:
        """Every record with data on ``vol_id`` (caller holds the lock)."""
        return (e for e in self._records.values() if any(s.volume == vol_id for s in e.segments))

    def current(self, entry: Entry) -> bool:
        return self.get(*entry.bk) is entry

    def forget(self, entries: Iterable[Entry]) -> None:
        """Take ``entries`` out of memory (caller holds the lock and their key locks)."""
        for entry in entries:
            self._replace(entry.bk, None)

    async def write_removal(self, entries: Sequence[Entry], *, durable: bool) -> None:
        """Delete ``entries`` from the index (their key locks are held): synced per the
        durability setting, or unsynced (``durable=False``: a barrier is due before a
        write past the cache relies on it). Read-through copies of them become stale."""
        batch = Batch()
        for entry in entries:
            batch.delete_entry(entry.bucket, entry.key)
        await self._write(batch.set_seq(self._seq), self.sync and durable,
                          (e.bk for e in entries))
        for entry in entries:
            self.invalidate_fills(entry.bk)

    def now(self) -> float:
        return time.time()
