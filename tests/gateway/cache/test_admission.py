"""Admission: writes go past the cache when the backend keeps up, into it otherwise."""

from __future__ import annotations

from backends.core.errors import SlowDown
from backends.throttled import ThrottleSettings
from gateway.cache.admission import SMALL_OBJECT_BYTES, Admission
from tests.gateway.cache.conftest import (
    BUCKET,
    META,
    Env,
    body,
    cache_settings,
    payload,
    read_all,
    until,
)

LARGE = SMALL_OBJECT_BYTES


def test_unknown_backend_is_measured_by_one_write_after_the_cache() -> None:
    rule = Admission()
    assert not rule.prefer_backend(LARGE, now=0.0)  # the first write measures the cache
    rule.observe_cache(LARGE, 0.01, now=0.0)
    assert rule.prefer_backend(LARGE, now=0.1)  # the next one the backend ...
    assert not rule.prefer_backend(LARGE, now=0.2)  # ... and only that one


def test_backend_as_fast_as_the_cache_takes_the_write() -> None:
    rule = Admission(margin=0.8)
    rule.observe_cache(LARGE, 1.0, now=0.0)
    rule.observe_backend(LARGE, 1.2, now=0.0)  # 0.83x the cache rate
    assert rule.prefer_backend(LARGE, now=1.0)
    slow = Admission(margin=0.8)
    slow.observe_cache(LARGE, 1.0, now=0.0)
    slow.observe_backend(LARGE, 2.0, now=0.0)  # half the cache rate: a large write ...
    assert slow.prefer_backend(LARGE, now=1.0)  # ... would be written twice through it
    slow.observe_backend(LARGE, 10.0, now=0.0)
    assert not slow.prefer_backend(LARGE, now=1.0)  # below half: the cache pays
    small = Admission(margin=0.8)
    small.observe_cache(4096, 1.0, now=0.0)
    small.observe_backend(4096, 2.0, now=0.0)
    assert not small.prefer_backend(4096, now=1.0)  # small writes keep ``margin``


def test_a_probe_after_a_pause_replaces_the_stale_cache_rate() -> None:
    rule = Admission()
    rule.observe_cache(LARGE, 0.1, now=0.0)  # an idle disk at the start of a burst
    rule.observe_cache(LARGE, 0.1, now=1.0)
    rule.observe_backend(LARGE, 1.0, now=1.0)  # the backend: a tenth of that
    assert not rule.prefer_backend(LARGE, now=2.0)
    rule.observe_cache(LARGE, 1.0, now=40.0)  # the probe, 30 s later, as slow as it
    assert rule.cache.large == LARGE / 1.0
    assert rule.prefer_backend(LARGE, now=41.0)


def test_rates_are_compared_as_if_each_request_ran_alone() -> None:
    rule = Admission(margin=0.8)
    rule.observe_cache(LARGE, 1.0, now=0.0)  # a probe, alone
    for _ in range(4):
        rule.begin("write", LARGE)
    rule.observe_backend(LARGE, 3.0, now=0.0)  # while four writes shared the disk
    assert rule.prefer_backend(LARGE, now=1.0)  # 4/3 of the cache rate, not 1/3
    with rule.writing(LARGE):  # the four writes ended; this one runs alone
        pass
    for _ in range(4):
        rule.end("write", LARGE)
    for _ in range(4):
        rule.begin("write", 100)  # small requests are latencies: never scaled
    rule.observe_cache(100, 1.0, now=0.0)
    rule.observe_backend(100, 3.0, now=0.0)
    assert not rule.prefer_backend(100, now=1.0)
    reads = Admission(margin=0.8)
    reads.observe_read(LARGE, 1.0, now=0.0, hit=True)
    reads.begin("read", LARGE)
    reads.begin("read", LARGE)
    reads.observe_read(LARGE, 2.0, now=0.0, hit=False)  # two reads at once: as fast
    reads.end("read", LARGE)
    reads.end("read", LARGE)
    assert not reads.keep_copy(LARGE, now=1.0)


def test_size_classes_are_measured_apart() -> None:
    rule = Admission()
    rule.observe_cache(LARGE, 1.0, now=0.0)
    rule.observe_backend(LARGE, 1.0, now=0.0)
    rule.observe_cache(4096, 0.001, now=0.0)
    rule.observe_backend(4096, 0.01, now=0.0)  # small writes: the backend is 10x slower
    assert rule.prefer_backend(LARGE, now=1.0)
    assert not rule.prefer_backend(4096, now=1.0)


def test_small_flushes_do_not_measure_clients_writes() -> None:
    rule = Admission()
    rule.observe_cache(4096, 0.01, now=0.0)
    assert not rule.prefer_backend(4096, now=0.0)  # latency unknown: no probe yet
    rule.observe_backend(4096, 0.001, now=0.0, flush=True)  # a lone flush is quick
    assert rule.backend.small is None
    assert rule.prefer_backend(4096, now=0.1)  # unmeasured: one write probes the backend
    assert not rule.prefer_backend(4096, now=0.2)  # ... and only one
    rule.observe_backend(4096, 0.02, now=0.3)  # a client's write past the cache: slower
    assert not rule.prefer_backend(4096, now=0.4)


def test_each_path_is_probed_when_left_unmeasured() -> None:
    rule = Admission()
    rule.observe_cache(LARGE, 1.0, now=0.0)
    rule.observe_backend(LARGE, 1.0, now=0.0)
    assert rule.prefer_backend(LARGE, now=4.0)
    assert not rule.prefer_backend(LARGE, now=31.0)  # this write refreshes the cache rate
    rule.observe_cache(LARGE, 1.0, now=31.0)
    assert rule.prefer_backend(LARGE, now=31.1)  # and this one the backend rate
    slow = Admission()
    slow.observe_cache(LARGE, 1.0, now=0.0)
    slow.observe_backend(LARGE, 10.0, now=0.0)
    assert not slow.prefer_backend(LARGE, now=1.0)
    assert slow.prefer_backend(LARGE, now=6.0)  # a backend probe, once
    assert not slow.prefer_backend(LARGE, now=6.1)


def test_a_backend_slower_even_in_flushes_is_never_probed() -> None:
    rule = Admission()
    rule.observe_cache(4096, 0.001, now=0.0)
    rule.observe_backend(4096, 0.5, now=0.0, flush=True)  # e.g. a throttled backend
    assert not any(rule.prefer_backend(4096, now=t) for t in (1.0, 7.0, 20.0))
    rule.observe_cache(LARGE, 0.01, now=0.0)
    rule.observe_backend(LARGE, 5.0, now=0.0, flush=True)
    assert not any(rule.prefer_backend(LARGE, now=t) for t in (1.0, 7.0, 20.0))


def test_clean_objects_are_read_where_reads_are_faster() -> None:
    rule = Admission()
    assert rule.read_cached(LARGE, now=0.0)  # nothing measured: the cache first
    rule.observe_read(LARGE, 0.01, now=0.0, hit=True)
    assert not rule.read_cached(LARGE, now=0.1)  # then one read measures the backend
    rule.observe_read(LARGE, 0.011, now=0.2, hit=False)  # the backend reads as fast
    assert not rule.read_cached(LARGE, now=1.0)
    rule.observe_read(LARGE, 0.011, now=39.0, hit=False)
    assert rule.read_cached(LARGE, now=40.0)  # a probe of the cache, now and then
    assert not rule.read_cached(LARGE, now=40.1)
    rule.observe_read(LARGE, 0.1, now=41.0, hit=False)  # the backend became slow
    for _ in range(10):
        rule.observe_read(LARGE, 0.1, now=41.0, hit=False)
    assert rule.read_cached(4096, now=41.0) and rule.read_cached(LARGE, now=41.1)


def test_misses_are_copied_only_when_the_backend_reads_slower() -> None:
    rule = Admission()
    assert rule.keep_copy(4096, now=0.0)  # small copies cost little
    assert not rule.keep_copy(LARGE, now=0.0)  # nothing known: this miss measures the backend
    rule.observe_read(LARGE, 0.01, now=0.0, hit=False)
    assert rule.keep_copy(LARGE, now=0.1)  # one copy, so that a hit can measure the cache
    assert not any(rule.keep_copy(LARGE, now=t) for t in (0.2, 5.0, 29.0))
    rule.observe_read(LARGE, 0.01, now=1.0, hit=True)  # the cache reads as fast
    assert not any(rule.keep_copy(LARGE, now=t) for t in (31.0, 60.0, 100.0))


def test_misses_of_a_slow_backend_are_copied_by_the_cache_write_rate() -> None:
    rule = Admission()
    rule.observe_cache(LARGE, 0.01, now=0.0)  # writes of the cache: no read measured yet
    rule.observe_read(LARGE, 0.5, now=0.0, hit=False)  # the backend reads slowly
    assert rule.keep_copy(LARGE, now=1.0)
    assert rule.keep_copy(LARGE, now=1.1)
    assert not rule.keep_copy(LARGE, now=6.0)  # every 5 s one miss measures the backend
    assert rule.keep_copy(LARGE, now=6.1)


def test_a_throttled_backend_is_not_probed() -> None:
    rule = Admission(backend_bandwidth=1.0)  # e.g. --backend-bandwidth 1B/s
    rule.observe_cache(LARGE, 0.01, now=0.0)
    rule.observe_cache(4096, 0.001, now=0.0)
    assert not any(rule.prefer_backend(size, now=t) for size in (4096, LARGE)
                   for t in (0.0, 6.0, 60.0))


def test_failing_backend_and_cache_mode_keep_writes_in_the_cache() -> None:
    rule = Admission()
    rule.observe_cache(LARGE, 1.0, now=0.0)
    rule.observe_backend(LARGE, 0.5, now=0.0)
    rule.backend_failed()
    assert not rule.backend_ok and not rule.prefer_backend(LARGE, now=1.0)
    rule.observe_backend(LARGE, 0.5, now=1.0)
    assert rule.backend_ok and rule.prefer_backend(LARGE, now=1.0)
    cache_only = Admission("cache")
    cache_only.observe_cache(LARGE, 1.0, now=0.0)
    cache_only.observe_backend(LARGE, 0.1, now=0.0)
    assert not cache_only.prefer_backend(LARGE, now=1.0)


async def test_fast_backend_takes_writes_past_the_cache(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, capacity=64 << 20, admission="auto"))
    tier.admission.observe_cache(LARGE, 1.0, now=tier.store.now())  # a slow cache
    data = payload(LARGE, 1)
    await tier.put_object(BUCKET, "first", body(data, 65536), meta=META)
    await tier.wait_flushed()  # the flush measures the backend
    assert tier.admission.backend.large is not None
    await tier.put_object(BUCKET, "second", body(data, 65536), meta=META)
    assert tier.store.get(BUCKET, "second") is None  # written around
    assert await read_all(await env.backend().get_object(BUCKET, "second")) == data
    assert await read_all(await tier.get_object(BUCKET, "second")) == data
    assert tier.status()["admission"]["routed_to_backend"] >= 1


async def test_slow_backend_keeps_writes_in_the_cache(env: Env) -> None:
    slow = env.backend(ThrottleSettings(bandwidth_bytes_per_s=2 << 20))
    tier = await env.tier(cache_settings(env.base, capacity=64 << 20, admission="auto"),
                          inner=slow)
    data = payload(LARGE, 2)
    await tier.put_object(BUCKET, "first", body(data, 65536), meta=META)
    await tier.wait_flushed()
    for i in range(3):
        await tier.put_object(BUCKET, f"k{i}", body(data, 65536), meta=META)
        assert tier.store.get(BUCKET, f"k{i}") is not None  # absorbed by the cache


async def test_full_cache_sends_writes_to_a_healthy_backend(env: Env) -> None:
    slow = env.backend(ThrottleSettings(bandwidth_bytes_per_s=200_000))
    tier = await env.tier(cache_settings(env.base, capacity=100_000, admission="auto",
                                         backpressure_timeout_s=0.0), inner=slow)
    data = {f"k{i}": payload(30_000, i) for i in range(8)}  # 2.4x the cache
    for key, value in data.items():
        await tier.put_object(BUCKET, key, body(value), meta=META)  # never SlowDown
    status = tier.status()
    assert status["slowdowns"] == 0 and status["writearound_bytes_total"] > 0
    assert status["cache_used_bytes"] <= 100_000
    await tier.wait_flushed()
    for key, value in data.items():
        assert await read_all(await tier.get_object(BUCKET, key)) == value
        assert await read_all(await env.backend().get_object(BUCKET, key)) == value


async def test_full_cache_and_failing_backend_slow_down(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, capacity=50_000, admission="auto"))
    env.break_bucket()
    await tier.put_object(BUCKET, "a", body(payload(30_000, 1)), meta=META)
    await until(lambda: not tier.admission.backend_ok, "a flush failed")
    try:
        await tier.put_object(BUCKET, "b", body(payload(30_000, 2)), meta=META)
        raise AssertionError("a full cache in front of a failing backend must refuse")
    except SlowDown as exc:
        assert exc.retry_after >= 1
    env.repair_bucket()


def test_a_backend_a_little_slower_than_the_cache_gets_no_copies() -> None:
    rule = Admission()
    rule.observe_read(LARGE, 0.01, now=0.0, hit=True)
    rule.observe_read(LARGE, 0.015, now=0.0, hit=False)  # 0.67x the cache: noise, not a gap
    assert not any(rule.keep_copy(LARGE, now=t) for t in (1.0, 2.0, 40.0))
    for _ in range(3):
        rule.observe_read(LARGE, 0.1, now=41.0, hit=False)  # now clearly slower
    assert rule.keep_copy(LARGE, now=42.0)
