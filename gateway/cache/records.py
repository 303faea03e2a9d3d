"""The cache's records in memory, indexed so that nothing scans them all.

Per bucket: a ``SortedDict`` key -> :class:`Entry` (a listing starts by bisection and
walks on in key order), the unflushed records by ``(seq, key)``, and their byte and count
totals. Globally: a ``SortedList`` of ``(dirty_since, seq, bucket, key)`` (the oldest
unflushed record is its first item). Every change goes through :meth:`Records.swap`, in
O(log n). Not thread-safe: :class:`~gateway.cache.store.CacheStore` calls it under its lock.

Two kinds of observers ride on :meth:`Records.swap`, at O(1) per observer and change:

* a :class:`Cursor` is a listing's position in one bucket. A record removed ahead of
  it (an evicted clean copy, a flushed tombstone) stays visible to that listing as a
  *ghost* until the listing passes its key. So a key that was unflushed when a listing
  began is listed even if it is flushed and evicted before the cache's part of the
  listing reaches it, after the backend's part was read past it.
* a :class:`Watch` counts the bytes of the records unflushed at its start that have been
  flushed or replaced since (the progress of ``wait_flushed``).
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from operator import attrgetter

from sortedcontainers import SortedDict, SortedList

from gateway.cache.entry import Entry

BK = tuple[str, str]
_EMPTY: Mapping[str, Entry] = {}
_by_key = attrgetter("key")


class Cursor:
    """Where one listing of ``bucket`` (keys starting with ``prefix``) stands: every key
    up to ``after`` has been handed out. ``ghosts`` are records removed ahead of it."""

    __slots__ = ("__weakref__", "after", "bucket", "ghosts", "prefix")

    def __init__(self, bucket: str, prefix: str, after: str) -> None:
        self.bucket = bucket
        self.prefix = prefix
        self.after = after
        self.ghosts: dict[str, Entry] = {}

    def ahead(self, key: str) -> bool:
        return key > self.after and key.startswith(self.prefix)


class Watch:
    """The records unflushed in ``bucket`` (None: every bucket) when it started: those with
    a sequence number up to ``seq``. ``total`` is their size; ``done`` grows by a record's
    size when it is flushed, removed or replaced by a newer write."""

    __slots__ = ("bucket", "done", "seq", "total")

    def __init__(self, bucket: str | None, seq: int, total: int) -> None:
        self.bucket = bucket
        self.seq = seq
        self.total = total
        self.done = 0


class Records:
    def __init__(self) -> None:
        self._maps: dict[str, SortedDict[str, Entry]] = {}  # bucket -> key -> Entry
        self._dirty: dict[str, SortedDict[tuple[int, str], Entry]] = {}  # (seq, key) -> Entry
        self._dirty_bytes: Counter[str] = Counter()
        self._live_dirty: Counter[str] = Counter()  # unflushed records that are no tombstone
        # (dirty_since, seq, bucket, key)
        self._oldest: SortedList[tuple[float, int, str, str]] = SortedList()
        self._cursors: dict[str, weakref.WeakSet[Cursor]] = {}
        self._watches: set[Watch] = set()
        self.dirty_count = 0
        self.dirty_bytes = 0

    # -- reading ---------------------------------------------------------------------
    def get(self, bucket: str, key: str) -> Entry | None:
        per = self._maps.get(bucket)
        return per.get(key) if per is not None else None

    def of(self, bucket: str) -> Mapping[str, Entry]:
        """The records of ``bucket`` by key, in key order (live: do not hold across awaits)."""
        per = self._maps.get(bucket)
        return per if per is not None else _EMPTY

    def values(self) -> Iterator[Entry]:
        for per in self._maps.values():
            yield from per.values()

    def dirty(self, bucket: str | None = None) -> Iterator[Entry]:
        """The unflushed records (of ``bucket``), by sequence number within a bucket."""
        buckets = [bucket] if bucket is not None else list(self._dirty)
        for name in buckets:
            yield from self._dirty.get(name, {}).values()

    def dirty_bytes_of(self, bucket: str) -> int:
        return self._dirty_bytes.get(bucket, 0)

    def has_live_dirty(self, bucket: str) -> bool:
        """Whether an unflushed object (not a pending delete) of ``bucket`` exists."""
        return self._live_dirty.get(bucket, 0) > 0

    def dirty_in(self, bucket: str, prefix: str = "", after: str = "") -> list[Entry]:
        """The unflushed records of ``bucket`` whose keys start with ``prefix`` and sort
        after ``after``, in key order. Read off the sorted keys of that range, or, when
        fewer records are unflushed than the range holds, sorted from those: O(log n +
        min(range, d log d)), never a sort of the whole bucket."""
        per, dirty = self._maps.get(bucket), self._dirty.get(bucket)
        if per is None or not dirty:
            return []
        start = per.bisect_right(after) if after >= prefix else per.bisect_left(prefix)
        end = _prefix_end(prefix)
        stop = per.bisect_left(end) if end is not None else len(per)
        if len(dirty) < stop - start:
            return sorted((e for e in dirty.values()
                           if e.key > after and e.key.startswith(prefix)), key=_by_key)
        return [e for e in per.values()[start:stop] if e.dirty]

    def oldest_dirty_since(self) -> float | None:
        return self._oldest[0][0] if self._oldest else None

    def min_dirty_seq(self, bucket: str | None,
                      skip: Callable[[BK, int], bool] | None = None) -> int | None:
        """The smallest sequence number of an unflushed record (of ``bucket``), passing
        over the records ``skip(bk, seq)`` accepts (few: the quarantined ones)."""
        maps = [(bucket, self._dirty.get(bucket))] if bucket is not None \
            else list(self._dirty.items())
        firsts = []
        for name, dirty in maps:
            for seq, key in dirty.keys() if dirty else ():
                if skip is None or not skip((name, key), seq):
                    firsts.append(seq)
                    break
        return min(firsts) if firsts else None

    # -- the one way to change a record ----------------------------------------------
    def swap(self, bk: BK, new: Entry | None) -> Entry | None:
        """Make ``new`` (None: nothing) the record of ``bk``; return the previous one."""
        bucket, key = bk
        per = self._maps.get(bucket)
        old = per.get(key) if per is not None else None
        if new is not None:
            if per is None:
                per = self._maps[bucket] = SortedDict()
            per[key] = new  # an existing key keeps its place: no re-sorting
        elif old is not None and per is not None:
            del per[key]
            if not per:
                del self._maps[bucket]
        if old is not None and old.dirty:
            if new is not None and new.dirty and _same_dirt(old, new):
                self._dirty[bucket][(new.seq, key)] = new  # DIRTY <-> FLUSHING
            else:
                self._forget_dirty(old)
                if self._watches:
                    self._settle(old, new)
                if new is not None and new.dirty:
                    self._add_dirty(new)
        elif new is not None and new.dirty:
            self._add_dirty(new)
        if new is None and old is not None and bucket in self._cursors:
            for cursor in self._cursors[bucket]:
                if cursor.ahead(key):
                    cursor.ghosts[key] = old
        return old

    def _add_dirty(self, entry: Entry) -> None:
        bucket = entry.bucket
        per = self._dirty.get(bucket)
        if per is None:
            per = self._dirty[bucket] = SortedDict()
        per[(entry.seq, entry.key)] = entry
        self._dirty_bytes[bucket] += entry.size
        if not entry.deleted:
            self._live_dirty[bucket] += 1
        self.dirty_count += 1
        self.dirty_bytes += entry.size
        if entry.dirty_since is not None:
            self._oldest.add((entry.dirty_since, entry.seq, bucket, entry.key))

    def _forget_dirty(self, entry: Entry) -> None:
        bucket = entry.bucket
        per = self._dirty[bucket]
        del per[(entry.seq, entry.key)]
        if not per:
            del self._dirty[bucket]
        _decrement(self._dirty_bytes, bucket, entry.size)
        if not entry.deleted:
            _decrement(self._live_dirty, bucket, 1)
        self.dirty_count -= 1
        self.dirty_bytes -= entry.size
        if entry.dirty_since is not None:
            self._oldest.remove((entry.dirty_since, entry.seq, bucket, entry.key))

    # -- listing cursors ---------------------------------------------------------------
    def cursor(self, bucket: str, prefix: str, after: str) -> Cursor:
        """A listing of the keys of ``bucket`` starting with ``prefix`` after ``after``."""
        cursor = Cursor(bucket, prefix, after)
        self._cursors.setdefault(bucket, weakref.WeakSet()).add(cursor)
        return cursor

    def release(self, cursor: Cursor) -> None:
        cursors = self._cursors.get(cursor.bucket)
        if cursors is not None:
            cursors.discard(cursor)
            if not cursors:
                del self._cursors[cursor.bucket]

    def page(self, cursor: Cursor, limit: int) -> tuple[list[Entry], bool]:
        """The next records of ``cursor`` in key order (about ``limit``: ghosts due in the
        range are added) and whether more may follow. O(log n + limit)."""
        per = self._maps.get(cursor.bucket)
        out: list[Entry] = []
        more = False
        if per is not None:
            prefix, after = cursor.prefix, cursor.after
            keys = (per.irange(minimum=after, inclusive=(False, True)) if after >= prefix
                    else per.irange(minimum=prefix))
            for key in keys:
                if not key.startswith(prefix):
                    break
                if len(out) >= limit:
                    more = True
                    break
                out.append(per[key])
        if cursor.ghosts:
            due = [g for k, g in cursor.ghosts.items() if not more or k <= out[-1].key]
            for ghost in due:
                del cursor.ghosts[ghost.key]
            # A ghost shows only while its key has no live record (a live one is newer).
            due = [g for g in due if per is None or g.key not in per]
            if due:
                out = sorted(out + due, key=_by_key)
        if out:
            cursor.after = out[-1].key
        return out, more

    # -- flush watches -----------------------------------------------------------------
    def watch(self, bucket: str | None, seq: int) -> Watch:
        total = self.dirty_bytes if bucket is None else self.dirty_bytes_of(bucket)
        watch = Watch(bucket, seq, total)
        self._watches.add(watch)
        return watch

    def unwatch(self, watch: Watch) -> None:
        self._watches.discard(watch)

    def pending(self, watch: Watch, skip: Callable[[BK, int], bool] | None = None) -> bool:
        """Whether a record unflushed when ``watch`` started is still unflushed (or one
        whose number was drawn before and that was installed after: it is waited for),
        leaving out those ``skip(bk, seq)`` accepts."""
        first = self.min_dirty_seq(watch.bucket, skip)
        return first is not None and first <= watch.seq

    def _settle(self, old: Entry, new: Entry | None) -> None:
        """``old`` (unflushed) stopped being so: flushed, removed or replaced."""
        for watch in self._watches:
            if old.seq <= watch.seq and watch.bucket in (None, old.bucket):
                watch.done += old.size


def _same_dirt(old: Entry, new: Entry) -> bool:
    """The same unflushed version (only DIRTY <-> FLUSHING differ)."""
    return (old.seq == new.seq and old.size == new.size and old.deleted == new.deleted
            and old.dirty_since == new.dirty_since)


def _prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix`` (None: none)."""
    for i in range(len(prefix) - 1, -1, -1):
        if ord(prefix[i]) < 0x10FFFF:
            return prefix[:i] + chr(ord(prefix[i]) + 1)
    return None


def _decrement(counter: Counter[str], bucket: str, amount: int) -> None:
    left = counter[bucket] - amount
    if left:
        counter[bucket] = left
    else:
        del counter[bucket]
