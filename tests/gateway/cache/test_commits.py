"""Group commit: concurrent synced writes share one write call; waiters resolve only after
it returned; failures reach every waiter of the group; unsynced writes are grouped too,
and a group is synced when any of its writes asks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from backends.core.errors import ServiceUnavailable
from gateway.cache.commits import GroupCommit
from gateway.cache.entry import Entry, EntryState
from gateway.cache.index import Batch, Index
from tests.gateway.cache.conftest import META


class Recorder:
    """A blocking ``write_many`` that records its calls; ``gate`` holds them back."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[Batch], bool]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail: Exception | None = None

    def __call__(self, batches: Sequence[Batch], sync: bool) -> None:
        self.entered.set()
        self.gate.wait(10)
        self.calls.append((list(batches), sync))
        if self.fail is not None:
            raise self.fail


def batch(n: int) -> Batch:
    return Batch().set_seq(n)


async def entered(rec: Recorder) -> None:
    await asyncio.get_running_loop().run_in_executor(None, rec.entered.wait, 10)


async def test_concurrent_synced_writes_share_one_call_in_arrival_order() -> None:
    rec = Recorder()
    group = GroupCommit(rec)
    rec.gate.clear()
    first = asyncio.ensure_future(group.write(batch(0), sync=True))
    await entered(rec)  # the first group is being written: the others queue up
    rest = [asyncio.ensure_future(group.write(batch(n), sync=True)) for n in range(1, 9)]
    await asyncio.sleep(0.05)
    assert not any(t.done() for t in [first, *rest])  # nobody resolved before the write
    rec.gate.set()
    await asyncio.gather(first, *rest)
    assert [len(b) for b, _ in rec.calls] == [1, 8]
    assert all(sync for _, sync in rec.calls)
    assert [b.puts for b in rec.calls[1][0]] == [batch(n).puts for n in range(1, 9)]
    assert (group.groups, group.batches) == (2, 9)


async def test_a_failed_group_fails_all_its_waiters_and_the_next_group_goes_on() -> None:
    rec = Recorder()
    group = GroupCommit(rec)
    rec.gate.clear()
    first = asyncio.ensure_future(group.write(batch(0), sync=True))
    await entered(rec)
    rec.fail = ServiceUnavailable("disk gone")
    doomed = [asyncio.ensure_future(group.write(batch(n), sync=True)) for n in (1, 2)]
    await asyncio.sleep(0.01)
    rec.gate.set()
    with pytest.raises(ServiceUnavailable):
        await first
    for task in doomed:
        with pytest.raises(ServiceUnavailable):
            await task
    rec.fail = None
    await group.write(batch(3), sync=True)
    assert [len(b) for b, _ in rec.calls] == [1, 2, 1]


async def test_unsynced_writes_share_a_group_synced_when_any_of_it_asks() -> None:
    rec = Recorder()
    group = GroupCommit(rec)
    await group.write(batch(0), sync=False)  # alone: written at once, unsynced
    rec.gate.clear()
    first = asyncio.ensure_future(group.write(batch(1), sync=False))
    await entered(rec)
    unsynced = [asyncio.ensure_future(group.write(batch(n), sync=False)) for n in (2, 3)]
    await asyncio.sleep(0.01)
    rec.gate.set()
    await asyncio.gather(first, *unsynced)
    rec.gate.clear()
    rec.entered.clear()
    first = asyncio.ensure_future(group.write(batch(4), sync=False))
    await entered(rec)
    mixed = [asyncio.ensure_future(group.write(batch(5), sync=False)),
             asyncio.ensure_future(group.write(batch(6), sync=True))]
    await asyncio.sleep(0.01)
    rec.gate.set()
    await asyncio.gather(first, *mixed)
    assert [(len(b), sync) for b, sync in rec.calls] == [
        (1, False), (1, False), (2, False), (1, False), (2, True)]
    assert [b.puts for b in rec.calls[-1][0]] == [batch(5).puts, batch(6).puts]


async def test_a_cancelled_waiter_does_not_unqueue_its_batch() -> None:
    rec = Recorder()
    group = GroupCommit(rec)
    rec.gate.clear()
    first = asyncio.ensure_future(group.write(batch(0), sync=True))
    await entered(rec)
    second = asyncio.ensure_future(group.write(batch(1), sync=True))
    await asyncio.sleep(0.01)
    second.cancel()
    rec.gate.set()
    await first
    with pytest.raises(asyncio.CancelledError):
        await second
    while group.batches < 2:  # noqa: ASYNC110  a test polling the group
        await asyncio.sleep(0.01)
    assert [len(b) for b, _ in rec.calls] == [1, 1]  # written all the same


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
