"""WritebackPolicy decisions with a controlled clock (no sleeping, no timing)."""

from __future__ import annotations

from pathlib import Path

from backends.core.base import ObjectMeta
from gateway.cache.entry import Entry, EntryState
from gateway.cache.policy import Phase, WritebackPolicy
from gateway.cache.settings import CacheSettings
from gateway.cache.store import CacheStore
from tests.gateway.cache.conftest import cache_settings


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _dirty(store: CacheStore, key: str, size: int, since: float) -> None:
    store.set_memory(("b", key), Entry(
        bucket="b", key=key, state=EntryState.DIRTY, seq=store.next_seq(), size=size,
        etag="0" * 32, meta=ObjectMeta(), segments=(), last_modified=since, dirty_since=since))


async def _opened(settings: CacheSettings, tmp_path: Path
                  ) -> tuple[CacheStore, Clock, WritebackPolicy]:
    """An open store, a clock and the policy over them (a backend of 1000 B/s)."""
    store = CacheStore(settings, tmp_path / "index")
    await store.open()
    clock = Clock()
    return store, clock, WritebackPolicy(store, settings, backend_bandwidth=1000.0,
                                         clock=clock)


async def test_phase_transitions_follow_ut_and_id(tmp_path: Path) -> None:
    settings = cache_settings(tmp_path, capacity=10_000_000, inactivity_delay_s=30,
                              utilization_threshold=0.3, max_dirty_age_s=300)
    store, clock, policy = await _opened(settings, tmp_path)
    assert policy.phase is Phase.IDLE and policy.allowed_flushes() == 0

    _dirty(store, "a", 5000, store.now())
    store.stats.ingest_bytes_total += 5000
    clock.t += 1  # ingest 5000 B/s > UT x B = 300 B/s
    policy.tick()
    assert policy.phase is Phase.PHASE1
    assert policy.allowed_flushes() == 1  # spare bandwidth: one background flush
    store.stats.backend_client_bytes_total += 800
    store.stats.ingest_bytes_total += 5000
    clock.t += 1  # clients use 800 B/s of the backend's 1000: no spare bandwidth
    policy.tick()
    assert policy.phase is Phase.PHASE1 and policy.allowed_flushes() == 0
    store.space.waiters = 1  # a writer waits for room: flush at full concurrency
    assert policy.allowed_flushes() == settings.flush_concurrency
    store.space.waiters = 0

    store.stats.ingest_bytes_total += 200  # 200 B/s: below UT x B
    clock.t += 1
    policy.tick()
    assert policy.phase is Phase.PHASE1  # not for long enough yet
    clock.t += 29.5
    policy.tick()
    assert policy.phase is Phase.PHASE1
    clock.t += 1
    policy.tick()
    assert policy.phase is Phase.PHASE2 and policy.write_around
    assert policy.allowed_flushes() == settings.flush_concurrency
    store.set_memory(("b", "a"), None)  # flushed before the next tick: idle already
    assert not policy.write_around
    _dirty(store, "a", 5000, store.now())

    store.stats.ingest_bytes_total += 10_000  # ingest rises: back to phase 1
    clock.t += 1
    policy.tick()
    assert policy.phase is Phase.PHASE1 and not policy.write_around

    store.set_memory(("b", "a"), None)  # everything flushed
    clock.t += 1
    policy.tick()
    assert policy.phase is Phase.IDLE
    assert [p.value for p in policy.history] == ["idle", "phase1", "phase2", "phase1", "idle"]
    await store.close()


async def test_deadline_overrides_phase1(tmp_path: Path) -> None:
    settings = cache_settings(tmp_path, max_dirty_age_s=60, inactivity_delay_s=3600)
    store, clock, policy = await _opened(settings, tmp_path)
    _dirty(store, "young", 10, store.now())
    store.stats.ingest_bytes_total += 100_000
    store.stats.backend_client_bytes_total += 100_000  # no spare bandwidth
    clock.t += 1
    policy.tick()
    assert policy.allowed_flushes() == 0
    _dirty(store, "old", 10, store.now() - 61)
    store.stats.ingest_bytes_total += 100_000
    store.stats.backend_client_bytes_total += 100_000
    clock.t += 1
    policy.tick()
    assert policy.deadline_due and policy.allowed_flushes() == settings.flush_concurrency
    await store.close()


async def test_room_is_made_ahead_only_while_no_client_writes_past_the_cache(
        tmp_path: Path) -> None:
    """A cache 80 % full of dirty data flushes at full concurrency to make room ahead of
    need, but not while clients write past it (a burst larger than the cache): those
    writes have the backend, and flushes would only slow them down."""
    settings = cache_settings(tmp_path, capacity=10_000, inactivity_delay_s=3600,
                              max_dirty_age_s=3600)
    store, clock, policy = await _opened(settings, tmp_path)
    _dirty(store, "a", 9000, store.now())
    store.stats.ingest_bytes_total += 9000
    clock.t += 1
    policy.tick()
    assert policy.allowed_flushes() == settings.flush_concurrency  # room ahead of need
    store.stats.ingest_bytes_total += 5000
    store.stats.backend_client_bytes_total += 5000  # the burst's writes go past it
    clock.t += 1
    policy.tick()
    assert policy.allowed_flushes() == 0
    store.space.waiters = 1  # but a writer waiting for room is served at full speed
    assert policy.allowed_flushes() == settings.flush_concurrency
    await store.close()


async def test_on_the_backends_disk_ingest_takes_the_spare_bandwidth(
        tmp_path: Path) -> None:
    """Where the cache shares the backend's disk, its own ingest uses the bandwidth a
    background flush would take: no flush while a burst fills the cache."""
    settings = cache_settings(tmp_path, capacity=10_000_000, inactivity_delay_s=3600)
    store = CacheStore(settings, tmp_path / "index")
    await store.open()
    for shared, flushes in ((False, 1), (True, 0)):
        clock = Clock()
        policy = WritebackPolicy(store, settings, clock=clock,
                                 shares_disk=lambda shared=shared: shared)
        _dirty(store, "a", 5000, store.now())
        store.stats.ingest_bytes_total += 5000
        clock.t += 1
        policy.tick()
        assert policy.allowed_flushes() == flushes
        clock.t += 1
        policy.tick()  # the burst is over: the backend is spare again
        assert policy.allowed_flushes() == 1
    await store.close()


async def test_bandwidth_is_measured_when_not_configured(tmp_path: Path) -> None:
    settings = cache_settings(tmp_path)
    store = CacheStore(settings, tmp_path / "index")
    clock = Clock()
    policy = WritebackPolicy(store, settings, clock=clock)
    assert policy.bandwidth is None
    store.stats.flush_bytes_total += 4000
    clock.t += 2
    policy.tick()
    assert policy.bandwidth == 2000.0
    clock.t += 1
    policy.tick()  # no flush this tick: no new information, the estimate stays
    assert policy.bandwidth == 2000.0
    store.stats.flush_bytes_total += 100
    clock.t += 1
    policy.tick()  # a slow sample (e.g. a trickle flush) lowers it only gradually
    assert policy.bandwidth == 1900.0
