"""The space manager (gateway/cache/space.py) on its own: real volumes and data files,
the records it evicts held by an in-memory stand-in for the record index."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pytest

from backends.core.base import ObjectMeta
from backends.core.errors import ServiceUnavailable, SlowDown
from gateway.cache.changes import Changes
from gateway.cache.entry import Entry, EntryState, Segment
from gateway.cache.keylock import KeyLocks
from gateway.cache.settings import CacheSettings, CacheVolumeSettings
from gateway.cache.space import SpaceManager
from gateway.cache.stats import Stats
from gateway.cache.volumes import DataFileWriter, Volume, charge

BK = tuple[str, str]
CAPACITY = charge(1000) * 4  # room for four 1000-byte files


class FakeRecords:
    """The records as the space manager sees them (space.Occupants), in LRU order."""

    def __init__(self) -> None:
        self.keys = KeyLocks()
        self.records: OrderedDict[BK, Entry] = OrderedDict()
        self.removals: list[tuple[list[BK], bool]] = []

    def add(self, key: str, segments: Sequence[Segment], *, dirty: bool = False) -> Entry:
        entry = Entry(bucket="b", key=key, seq=len(self.records) + 1,
                      state=EntryState.DIRTY if dirty else EntryState.CLEAN,
                      size=sum(s.size for s in segments), etag="e", meta=ObjectMeta(),
                      segments=tuple(segments), last_modified=0.0,
                      dirty_since=0.0 if dirty else None)
        self.records[entry.bk] = entry
        return entry

    def unflushed_on(self, vol_id: str) -> bool:
        return any(e.dirty and any(s.volume == vol_id for s in e.segments)
                   for e in self.records.values())

    def dirty_on(self, vol_id: str) -> bool:
        return self.unflushed_on(vol_id)  # (no multipart parts here)

    def evictable(self) -> Iterator[Entry]:
        return (e for e in self.records.values() if not e.dirty)

    def records_on(self, vol_id: str) -> Iterator[Entry]:
        return (e for e in self.records.values() if any(s.volume == vol_id for s in e.segments))

    def current(self, entry: Entry) -> bool:
        return self.records.get(entry.bk) is entry

    def forget(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            assert self.keys.locked(entry.bk)
            del self.records[entry.bk]

    async def write_removal(self, entries: Sequence[Entry], *, durable: bool) -> None:
        assert all(self.keys.locked(e.bk) for e in entries)
        self.removals.append(([e.bk for e in entries], durable))


@pytest.fixture
def records() -> FakeRecords:
    return FakeRecords()


@pytest.fixture
def stats() -> Stats:
    return Stats()


@pytest.fixture
async def space(tmp_path: Path, records: FakeRecords, stats: Stats) -> SpaceManager:
    settings = CacheSettings(volumes=[CacheVolumeSettings(path=tmp_path / "vol0",
                                                          capacity_bytes=CAPACITY)],
                             backpressure_timeout_s=0.3)
    manager = SpaceManager(settings, records, lock=threading.Lock(), changes=Changes(),
                           stats=stats)
    await manager.open_volumes([(v.path, v.capacity_bytes) for v in settings.volumes])
    return manager


def only_volume(space: SpaceManager) -> Volume:
    (vol,) = space.volumes.values()
    return vol


async def write_file(space: SpaceManager, size: int = 1000) -> Segment:
    """A committed data file of ``size`` bytes, its space claimed and settled."""
    vol = space.choose_volume()
    claim = space.open_claim(vol)
    await space.reserve(claim, charge(size), wait=False)
    writer = await asyncio.to_thread(DataFileWriter.whole, vol, b"x" * size, sync=False)
    space.settle(claim)
    return Segment(vol.id, writer.name, size, writer.md5())


def on_disk(vol: Volume, seg: Segment) -> bool:
    return vol.file_path(seg.file).exists()


async def test_a_reservation_is_charged_then_settled_or_given_back(
        space: SpaceManager) -> None:
    vol = only_volume(space)
    claim = space.open_claim(vol)
    await space.reserve(claim, 600, wait=False)
    await space.reserve(claim, 400, wait=False)
    assert (vol.used, vol.inflight, claim.reserved) == (1000, 1000, 1000)
    assert not space.volume_idle(vol)  # a write is in progress there
    space.settle(claim)
    assert (vol.used, vol.inflight, vol.claims) == (1000, 0, set())
    other = space.open_claim(vol)
    await space.reserve(other, 500, wait=False)
    space.drop_claim(other)
    assert (vol.used, vol.inflight, vol.claims) == (1000, 0, set())
    assert space.used == 1000 and space.capacity == CAPACITY
    assert space.max_object == CAPACITY - charge(0)


async def test_a_volume_keeps_its_peak_use_between_two_readings(space: SpaceManager) -> None:
    """The elastic controller sizes the next volume by the peak a burst used; a burst
    that fills and frees a volume between two control ticks still shows its peak."""
    vol = only_volume(space)
    claim = space.open_claim(vol)
    await space.reserve(claim, 700, wait=False)
    space.drop_claim(claim)  # given back before anybody looked
    assert vol.used == 0
    assert vol.take_peak() == 700
    assert vol.take_peak() == 0  # each reading starts over from what is used now


async def test_a_full_volume_without_clean_data_refuses_at_once_or_after_waiting(
        space: SpaceManager, records: FakeRecords) -> None:
    vol = only_volume(space)
    records.add("dirty", [await write_file(space, 3 * 1000)], dirty=True)
    claim = space.open_claim(vol)
    with pytest.raises(SlowDown):
        await space.reserve(claim, charge(1000) * 2, wait=False)
    started = asyncio.get_running_loop().time()
    with pytest.raises(SlowDown):
        await space.reserve(claim, charge(1000) * 2, wait=True)
    assert asyncio.get_running_loop().time() - started >= 0.25  # the backpressure timeout
    assert space.waiters == 0 and claim.reserved == 0
    space.drop_claim(claim)
    assert records.removals == []  # unflushed data is never evicted


async def test_a_waiting_writer_goes_on_once_room_is_given_back(
        space: SpaceManager) -> None:
    vol = only_volume(space)
    first = space.open_claim(vol)
    await space.reserve(first, CAPACITY - 100, wait=False)
    second = space.open_claim(vol)
    waiting = asyncio.ensure_future(space.reserve(second, 500, wait=True))
    await asyncio.sleep(0.05)
    assert not waiting.done() and space.waiters == 1
    space.drop_claim(first)  # room comes back: the waiter is woken
    await waiting
    assert second.reserved == 500 and space.waiters == 0


async def test_the_youngest_writers_give_up_when_all_wait_for_each_other(
        space: SpaceManager) -> None:
    vol = only_volume(space)
    old, young = space.open_claim(vol), space.open_claim(vol)
    await space.reserve(old, CAPACITY // 2, wait=False)
    await space.reserve(young, CAPACITY // 2, wait=False)
    older = asyncio.ensure_future(space.reserve(old, 1000, wait=True))
    await asyncio.sleep(0.01)
    with pytest.raises(SlowDown):  # nothing could ever free room: the younger one yields
        await space.reserve(young, 1000, wait=True)
    assert young.give_up and not old.give_up
    space.drop_claim(young)
    await older
    assert old.reserved == CAPACITY // 2 + 1000


async def test_eviction_frees_the_least_recently_used_clean_records_first(
        space: SpaceManager, records: FakeRecords, stats: Stats) -> None:
    vol = only_volume(space)
    segs = [await write_file(space) for _ in range(4)]  # the volume is full
    for i, seg in enumerate(segs):
        records.add(f"k{i}", [seg], dirty=i == 0)  # k0 is unflushed
    claim = space.open_claim(vol)
    await space.reserve(claim, charge(1000) * 2, wait=False)
    assert records.removals == [([("b", "k1"), ("b", "k2")], False)]  # unsynced, LRU first
    assert list(records.records) == [("b", "k0"), ("b", "k3")]
    assert not on_disk(vol, segs[1]) and not on_disk(vol, segs[2])
    assert on_disk(vol, segs[0]) and on_disk(vol, segs[3])
    assert vol.used == charge(1000) * 4 and claim.reserved == charge(1000) * 2
    assert not any(records.keys.locked(bk) for bk in records.records)  # locks released
    assert stats.evictions == 2


async def test_eviction_passes_over_records_whose_key_is_locked(
        space: SpaceManager, records: FakeRecords) -> None:
    vol = only_volume(space)
    segs = [await write_file(space) for _ in range(4)]
    for i, seg in enumerate(segs):
        records.add(f"k{i}", [seg])
    assert records.keys.try_acquire(("b", "k0"))  # a writer holds k0
    assert await space.evict(vol, charge(1000))
    assert records.removals == [([("b", "k1")], False)]
    records.keys.release(("b", "k0"))


async def test_a_pinned_file_stays_charged_until_its_reader_is_done(
        space: SpaceManager, records: FakeRecords) -> None:
    vol = only_volume(space)
    segs = [await write_file(space) for _ in range(4)]
    for i, seg in enumerate(segs):
        records.add(f"k{i}", [seg])
    space.pin(segs)  # readers hold every file: evicting the records frees no room
    claim = space.open_claim(vol)
    with pytest.raises(SlowDown):
        await space.reserve(claim, charge(1000), wait=False)
    assert records.records == OrderedDict()  # the records went (the backend has them) ...
    assert all(on_disk(vol, s) for s in segs)  # ... but the files are still being read
    assert vol.used == CAPACITY
    assert not space.volume_idle(vol)  # a pinned file keeps a volume attached
    await space.unpin(segs[:1])
    assert not on_disk(vol, segs[0]) and vol.used == CAPACITY - charge(1000)
    await space.reserve(claim, charge(1000), wait=False)
    space.drop_claim(claim)
    await space.unpin(segs[1:])
    assert vol.used == 0 and not any(on_disk(vol, s) for s in segs)


async def test_discard_deletes_unpinned_files_and_defers_pinned_ones(
        space: SpaceManager) -> None:
    vol = only_volume(space)
    free, held = await write_file(space), await write_file(space)
    space.pin([held])
    space.pin([held])  # two readers
    await space.discard([free, held])
    assert not on_disk(vol, free) and on_disk(vol, held)
    await space.unpin([held])
    assert on_disk(vol, held)
    await space.unpin([held])
    assert not on_disk(vol, held) and vol.used == 0


async def test_a_volume_is_removed_only_when_nothing_on_it_is_needed(
        space: SpaceManager, records: FakeRecords) -> None:
    vol = only_volume(space)
    clean = records.add("clean", [await write_file(space)])
    records.add("dirty", [await write_file(space)], dirty=True)
    assert not space.volume_idle(vol) and not await space.remove_volume(vol)
    del records.records[("b", "dirty")]  # flushed and replaced elsewhere
    assert records.keys.try_acquire(clean.bk)  # a record on it is locked right now
    assert not await space.remove_volume(vol)
    records.keys.release(clean.bk)
    assert await space.remove_volume(vol)
    assert records.removals == [([clean.bk], True)]  # one durable index write
    assert records.records == OrderedDict() and space.volumes == {}
    with pytest.raises(ServiceUnavailable):
        space.choose_volume()


async def test_new_files_go_to_the_roomiest_active_volume(
        space: SpaceManager, tmp_path: Path) -> None:
    first = only_volume(space)
    second = await space.add_volume(tmp_path / "vol1", CAPACITY // 2)
    assert space.choose_volume() is first
    first.retiring = True  # draining before a detach: no new files there
    assert space.active_volumes == [second] and space.choose_volume() is second
    second.retiring = True  # nothing else: a retiring volume still takes them
    assert space.choose_volume() is first
