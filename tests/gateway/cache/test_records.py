"""The indexed records (gateway/cache/records.py) against a plain dict and full scans."""

from __future__ import annotations

import random
from dataclasses import replace

from backends.core.base import ObjectMeta
from gateway.cache.entry import Entry, EntryState
from gateway.cache.records import Records

META = ObjectMeta()
BUCKETS = ("b1", "b2")


def entry(bucket: str, key: str, seq: int, state: EntryState, *, size: int = 1,
          deleted: bool = False, since: float | None = None) -> Entry:
    dirty = state is not EntryState.CLEAN
    return Entry(bucket=bucket, key=key, state=state, seq=seq, size=size, etag="e",
                 meta=META, segments=(), last_modified=0.0,
                 dirty_since=(since if since is not None else float(seq)) if dirty else None,
                 deleted=deleted)


def check(records: Records, model: dict[tuple[str, str], Entry]) -> None:
    dirty = [e for e in model.values() if e.dirty]
    assert records.dirty_count == len(dirty)
    assert records.dirty_bytes == sum(e.size for e in dirty)
    stamps = [e.dirty_since for e in dirty if e.dirty_since is not None]
    assert records.oldest_dirty_since() == (min(stamps) if stamps else None)
    assert sorted(e.seq for e in records.dirty()) == sorted(e.seq for e in dirty)
    for bucket in BUCKETS:
        mine = {k: e for (b, k), e in model.items() if b == bucket}
        assert list(records.of(bucket)) == sorted(mine)
        assert all(records.of(bucket)[k] is e for k, e in mine.items())
        in_bucket = [e for e in dirty if e.bucket == bucket]
        assert records.dirty_bytes_of(bucket) == sum(e.size for e in in_bucket)
        assert records.has_live_dirty(bucket) == any(not e.deleted for e in in_bucket)
        assert records.min_dirty_seq(bucket) == min((e.seq for e in in_bucket), default=None)
        assert [e.seq for e in records.dirty(bucket)] == sorted(e.seq for e in in_bucket)
        for prefix, after in [("", ""), ("a", ""), ("b/", ""), ("", "c"), ("a", "a/x"),
                              ("é", ""), ("d", "z")]:
            assert records.dirty_in(bucket, prefix, after) == sorted(
                (e for e in in_bucket if e.key.startswith(prefix) and e.key > after),
                key=lambda e: e.key)


def test_random_changes_keep_every_index_exact() -> None:
    rng = random.Random(7)
    records = Records()
    model: dict[tuple[str, str], Entry] = {}
    seq = 0
    for step in range(3000):
        bk = (rng.choice(BUCKETS), rng.choice("abcdefghij") + rng.choice(["", "/x", "é"]))
        old = model.get(bk)
        roll = rng.random()
        new: Entry | None
        if roll < 0.2:
            new = None
        elif roll < 0.4 and old is not None and old.dirty:  # flush starts, fails or ends
            new = replace(old, state=rng.choice(list(EntryState)))
            if new.state is EntryState.CLEAN:
                new = replace(new, dirty_since=None)
        else:
            seq += 1
            state = rng.choice([EntryState.CLEAN, EntryState.DIRTY])
            new = entry(*bk, seq, state, size=rng.randrange(100),
                        deleted=state is EntryState.DIRTY and rng.random() < 0.3,
                        since=rng.choice([None, float(rng.randrange(50))]))
        assert records.swap(bk, new) is old
        if new is None:
            model.pop(bk, None)
        else:
            model[bk] = new
        if step % 50 == 0:
            check(records, model)
    check(records, model)


def test_watch_counts_what_was_dirty_at_its_start() -> None:
    records = Records()
    a1 = entry("b1", "a", 1, EntryState.DIRTY, size=10)
    b2 = entry("b1", "b", 2, EntryState.DIRTY, size=5)
    other = entry("b2", "x", 3, EntryState.DIRTY, size=7)
    for e in (a1, b2, other):
        records.swap(e.bk, e)
    watch = records.watch("b1", seq=3)
    assert watch.total == 15 and records.pending(watch)
    records.swap(a1.bk, replace(a1, state=EntryState.FLUSHING))  # in flight: still pending
    assert watch.done == 0
    records.swap(a1.bk, replace(a1, state=EntryState.CLEAN, dirty_since=None))
    assert watch.done == 10 and records.pending(watch)
    records.swap(b2.bk, entry("b1", "b", 4, EntryState.DIRTY, size=99))  # overwritten
    assert watch.done == 15
    assert not records.pending(watch)  # the newer write (seq 4) is not waited for
    records.swap(other.bk, None)
    assert watch.done == 15  # another bucket
    everything = records.watch(None, seq=4)
    assert records.pending(everything)
    records.swap(("b1", "b"), None)
    assert not records.pending(everything) and everything.done == 99
    records.unwatch(watch)
    records.unwatch(everything)


def test_page_bisects_and_resumes_after_changes() -> None:
    records = Records()
    keys = [f"p{i:02d}/k{j}" for i in range(10) for j in range(5)]
    for n, key in enumerate(keys):
        records.swap(("b1", key), entry("b1", key, n + 1, EntryState.CLEAN))
    cursor = records.cursor("b1", "p03/", "p03/k1")
    page, more = records.page(cursor, 2)
    assert [e.key for e in page] == ["p03/k2", "p03/k3"] and more
    records.swap(("b1", "p03/k25"), entry("b1", "p03/k25", 99, EntryState.DIRTY))  # behind
    records.swap(("b1", "p03/k35"), entry("b1", "p03/k35", 100, EntryState.DIRTY))  # ahead
    page, more = records.page(cursor, 10)
    assert [e.key for e in page] == ["p03/k35", "p03/k4"] and not more
    # A start before the prefix begins at the prefix; one after all its keys finds none.
    assert [e.key for e in records.page(records.cursor("b1", "p09/", ""), 10)[0]] == [
        f"p09/k{j}" for j in range(5)]
    assert records.page(records.cursor("b1", "p03/", "p03/\U0010ffff"), 10) == ([], False)
    assert records.page(records.cursor("nobucket", "", ""), 10) == ([], False)


def test_a_record_removed_ahead_of_a_cursor_is_still_handed_out() -> None:
    records = Records()
    for n, key in enumerate("abcdefgh"):
        records.swap(("b1", key), entry("b1", key, n + 1, EntryState.CLEAN))
    cursor = records.cursor("b1", "", "")
    assert [e.key for e in records.page(cursor, 2)[0]] == ["a", "b"]
    evicted = records.swap(("b1", "d"), None)
    records.swap(("b1", "a"), None)  # behind: no ghost
    records.swap(("b1", "f"), None)
    records.swap(("b1", "f"), entry("b1", "f", 50, EntryState.DIRTY))  # live again: newer
    page, more = records.page(cursor, 2)  # live c, e and the ghost of d between them
    assert [e.key for e in page] == ["c", "d", "e"] and page[1] is evicted and more
    page, more = records.page(cursor, 10)
    assert [e.key for e in page] == ["f", "g", "h"] and page[0].seq == 50 and not more
    assert cursor.ghosts == {}
    records.release(cursor)
    records.swap(("b1", "h"), None)
    assert cursor.ghosts == {}  # released: no longer told


def test_dirty_in_reads_the_range_or_sorts_the_few_unflushed_records() -> None:
    records = Records()
    keys = [f"k{i:04d}" for i in range(400)] + ["p\U0010ffff", "p\U0010ffffz", "q"]
    dirty = [k for seq, k in enumerate(keys, 1) if seq % 4 == 0 or k.startswith("p")]
    for seq, key in enumerate(keys, 1):  # every fourth record unflushed, and the p...
        state = EntryState.DIRTY if key in dirty else EntryState.CLEAN
        records.swap(("b", key), entry("b", key, seq, state))

    def listed(prefix: str, after: str = "") -> list[str]:
        return [e.key for e in records.dirty_in("b", prefix, after)]

    # Wide ranges: fewer unflushed records than keys in range (sorted from those).
    assert listed("") == dirty
    assert listed("k", "k0100") == [k for k in dirty if k.startswith("k") and k > "k0100"]
    # Narrow ranges: fewer keys than unflushed records (read off the sorted keys).
    assert listed("k001") == [k for k in dirty if k.startswith("k001")]
    assert listed("k0399") == ["k0399"] and listed("k0398") == []
    assert listed("p\U0010ffff") == ["p\U0010ffff", "p\U0010ffffz"]  # (up to "q")
    assert listed("\U0010ffff") == []  # (a prefix with no upper bound)
    assert listed("k", "k9") == [] and listed("x") == [] and listed("k", "zz") == []
    assert records.dirty_in("none") == []
