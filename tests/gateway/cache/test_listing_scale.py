"""Listing a cache that holds 10^6 records never stalls the event loop.

The records are installed straight into the CacheStore through its own install path
(``set_memory``, what a commit or the replay at start does after the index write) rather
than through 10^6 PUTs: that is only a fast way to build the state, nothing is mocked.
The tier is started (flusher and writeback controller run) over a real PosixBackend that
holds a few objects of its own. A ticker task measures the longest gap between two of its
wake-ups (2 ms apart) while the pages are listed, calling ``status()`` (what a metrics
scrape does) each time. Only stalls are bounded; page times are printed, not asserted.
"""

from __future__ import annotations

import asyncio
import time
from typing import Self

import pytest

from backends.core.base import ObjectMeta
from gateway.cache.entry import Entry, EntryState
from gateway.cache.tier import CacheTier
from gateway.protocol.listing import ListPage
from gateway.service.objects import ObjectService
from tests.gateway.cache.conftest import BUCKET, Env, body, md5

N = 1_000_000
PREFIXES = 250
HIDDEN = 7  # every key of this prefix is a pending delete
STALL_LIMIT_S = 0.05
EMPTY_MD5 = md5(b"")


def install(tier: CacheTier) -> None:
    store = tier.store
    meta = ObjectMeta()
    now = store.now()
    for i in range(N):
        p = i % PREFIXES
        key = f"p{p:03d}/k{i:07d}"
        deleted = p == HIDDEN or i % 997 == 0
        state = EntryState.DIRTY if deleted or i % 1000 == 1 else EntryState.CLEAN
        # (Unflushed records have no data file: size 0, the MD5 of nothing, so the
        # flusher running meanwhile writes them to the backend for real.)
        entry = Entry(bucket=BUCKET, key=key, state=state, seq=store.next_seq(), size=0,
                      etag="" if deleted else EMPTY_MD5, meta=meta, segments=(),
                      last_modified=now, dirty_since=now if state is EntryState.DIRTY else None,
                      deleted=deleted)
        store.set_memory(entry.bk, entry)
    store.changed()


class Ticker:
    """The longest time the event loop kept a 2 ms sleeper waiting (plus the sleep), as
    the smaller of the wall-clock gap and the CPU time this process used in it: a gap in
    which the process was not even running (another process had the cores) is not a
    stall of this code."""

    def __init__(self, tier: CacheTier) -> None:
        self.tier = tier
        self.max_gap = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last, last_cpu = loop.time(), time.process_time()
        while True:
            await asyncio.sleep(0.002)
            gap = min(loop.time() - last, time.process_time() - last_cpu)
            self.max_gap = max(self.max_gap, gap)
            self.tier.status()  # a metrics scrape: O(1) in the number of records
            last, last_cpu = loop.time(), time.process_time()

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._run())
        await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_million_cached_keys_list_without_stalling_the_loop(env: Env) -> None:
    tier = await env.tier()
    for name in ("p000/k-backend", "p100/k-backend", "p007/only-in-backend", "top-level"):
        await tier.inner.put_object(BUCKET, name, body(name.encode()), meta=ObjectMeta())
    started = time.perf_counter()
    install(tier)
    installed = time.perf_counter() - started
    service = ObjectService(tier)
    timings: dict[str, float] = {}

    async def page(name: str, *, prefix: str = "", delimiter: str = "",
                   after: str = "") -> ListPage:
        t0 = time.perf_counter()
        result = await service.list_objects(BUCKET, prefix=prefix, delimiter=delimiter,
                                            max_keys=1000, after=after)
        timings[name] = time.perf_counter() - t0
        return result

    async with Ticker(tier) as ticker:
        grouped = await page("delimiter '/', whole bucket", delimiter="/")
        inside = await page("prefix p123/, after the middle", prefix="p123/", delimiter="/",
                            after="p123/k0500000")
        hidden = await page("prefix p007/ (4000 pending deletes)", prefix="p007/")
        flat = await page("no delimiter, after p200/", after="p200/")
        status = tier.status()
    print(f"\n{N} records installed in {installed:.1f} s; longest loop stall "
          f"{ticker.max_gap * 1000:.1f} ms; oldest dirty {status['oldest_dirty_age_s']:.1f} s")
    for name, seconds in timings.items():
        print(f"  {name}: {seconds * 1000:.0f} ms")

    assert grouped.common_prefixes == [f"p{p:03d}/" for p in range(PREFIXES)]
    assert [o.key for o in grouped.objects] == ["top-level"]
    keys = [o.key for o in inside.objects]
    assert len(keys) == 1000 and keys == sorted(keys) and keys[0] > "p123/k0500000"
    assert [o.key for o in hidden.objects] == ["p007/only-in-backend"]
    assert len(flat.objects) == 1000 and flat.objects[0].key.startswith("p200/")
    assert ticker.max_gap < STALL_LIMIT_S, f"the event loop stalled {ticker.max_gap:.3f} s"
