"""Group commit: writes queued together share one write call; waiters resolve only after
it returned; failures reach every waiter of the group; unsynced writes are grouped too,
and a group is synced when any of its writes asks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from backends.core.errors import ServiceUnavailable
from gateway.cache.commits import GATHER_TURNS, GroupCommit
from gateway.cache.entry import Entry, EntryState
from gateway.cache.index import Batch, Index
from tests.gateway.cache.conftest import META


class Recorder:
    """A ``write_many`` that records its calls (and runs ``during``, if set, inside
    each)."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[Batch], bool]] = []
        self.fail: Exception | None = None
        self.during: Callable[[], None] | None = None

    def __call__(self, batches: Sequence[Batch], sync: bool) -> None:
        if self.during is not None:
            self.during()
        self.calls.append((list(batches), sync))
        if self.fail is not None:
            raise self.fail


def batch(n: int) -> Batch:
    return Batch().set_seq(n)


def writes(group: GroupCommit[Batch], ns: Sequence[int], *, sync: bool
           ) -> list[asyncio.Future[None]]:
    return [asyncio.ensure_future(group.write(batch(n), sync=sync)) for n in ns]


async def test_writes_queued_together_share_one_call_in_arrival_order() -> None:
    rec = Recorder()
    group = GroupCommit(rec)
    first = writes(group, range(9), sync=True)
    rec.during = lambda: assert_not_done(first)  # nobody resolved before the write
    await asyncio.gather(*first)
    rec.during = None
    await asyncio.gather(*writes(group, [9], sync=True))  # queued later: the next group
    assert [len(b) for b, _ in rec.calls] == [9, 1]
    assert all(sync for _, sync in rec.calls)
    assert [b.puts for b in rec.calls[0][0]] == [batch(n).puts for n in range(9)]
    assert (group.groups, group.batches) == (2, 10)


async def test_commits_reaching_the_queue_a_few_turns_later_join_its_group() -> None:
    rec = Recorder()
    group = GroupCommit(rec)

    async def later(n: int, turns: int) -> None:
        for _ in range(turns):
            await asyncio.sleep(0)  # a request still on its way to its commit
        await group.write(batch(n), sync=True)
    await asyncio.gather(*(later(n, n) for n in range(GATHER_TURNS)))
    assert [len(b) for b, _ in rec.calls] == [GATHER_TURNS]


async def test_a_group_waits_at_most_its_turns_for_more() -> None:
    rec = Recorder()
    group = GroupCommit(rec)
    stop = asyncio.Event()

    async def trickle() -> None:  # a commit every turn, for ever
        n = 0
        while not stop.is_set():
            asyncio.ensure_future(group.write(batch(n), sync=False))
            n += 1
            await asyncio.sleep(0)
    feeder = asyncio.ensure_future(trickle())
    while not rec.calls:  # noqa: ASYNC110  a test polling the group
        await asyncio.sleep(0)
    stop.set()
    await feeder
    assert len(rec.calls[0][0]) <= GATHER_TURNS + 2


def assert_not_done(waiters: Sequence[asyncio.Future[None]]) -> None:
    assert not any(w.done() for w in waiters)


async def test_a_failed_group_fails_all_its_waiters_and_the_next_group_goes_on() -> None:
    rec = Recorder()
    group = GroupCommit(rec)
    rec.fail = ServiceUnavailable("disk gone")
    for task in writes(group, range(3), sync=True):
        with pytest.raises(ServiceUnavailable):
            await task
    rec.fail = None
    await group.write(batch(3), sync=True)
    assert [len(b) for b, _ in rec.calls] == [3, 1]
    assert (group.groups, group.batches) == (1, 1)


async def test_unsynced_writes_share_a_group_synced_when_any_of_it_asks() -> None:
    rec = Recorder()
    group = GroupCommit(rec)
    await group.write(batch(0), sync=False)  # alone: written at once, unsynced
    await asyncio.gather(*writes(group, range(1, 4), sync=False))
    await asyncio.gather(*writes(group, [4, 5], sync=False), *writes(group, [6], sync=True))
    assert [(len(b), sync) for b, sync in rec.calls] == [(1, False), (3, False), (3, True)]
    assert [b.puts for b in rec.calls[-1][0]] == [batch(n).puts for n in (4, 5, 6)]


async def test_a_cancelled_waiter_does_not_unqueue_its_batch() -> None:
    rec = Recorder()
    group = GroupCommit(rec)
    first, second = writes(group, [0, 1], sync=True)
    await asyncio.sleep(0)  # both queued
    second.cancel()
    await first
    with pytest.raises(asyncio.CancelledError):
        await second
    assert [len(b) for b, _ in rec.calls] == [2]  # written all the same
    assert group.batches == 2


async def test_index_commit_is_durable_and_ordered(tmp_path: Path) -> None:
    """Through a real RocksDB: many concurrent commits, one of them per key, land."""
    index = Index(tmp_path / "index")
    try:
        def entry(i: int) -> Entry:
            return Entry(bucket="b", key=f"k{i}", state=EntryState.DIRTY, seq=i, size=0,
                         etag="", meta=META, segments=(), last_modified=0.0)

        await asyncio.gather(*(index.commit(Batch().put_entry(entry(i)).set_seq(i),
                                            sync=True) for i in range(1, 101)))
        groups, batches = index.group_stats
        assert batches == 100 and groups < 100  # at least some syncs were shared
        loaded = index.load()
        assert sorted(e.key for e in loaded.entries) == sorted(f"k{i}" for i in range(1, 101))
        assert loaded.seq == 100
    finally:
        index.close()
