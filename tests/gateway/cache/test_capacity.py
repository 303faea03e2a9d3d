"""A bounded cache: backpressure then SlowDown, pass-through of objects that cannot fit."""

from __future__ import annotations

import asyncio

import pytest

from backends.core.errors import SlowDown
from tests.gateway.cache.conftest import (
    BUCKET,
    META,
    Env,
    body,
    cache_settings,
    md5,
    payload,
    read_all,
    until,
)


async def test_full_of_dirty_data_waits_then_slows_down(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, capacity=50_000,
                                         quarantine_attempts=1000))
    env.break_bucket()  # the backend cannot take flushes: dirty data stays
    await tier.put_object(BUCKET, "a", body(payload(30_000, 1)), meta=META)
    # While the backend fails, a full cache makes writers wait, not go to the backend.
    await until(lambda: tier.status()["flush_errors_total"] > 0, "a flush failed")
    with pytest.raises(SlowDown) as raised:
        await tier.put_object(BUCKET, "b", body(payload(30_000, 2)), meta=META)
    assert raised.value.retry_after >= 1
    status = tier.status()
    assert status["slowdowns"] == 1
    assert status["cache_used_bytes"] == 30_016 <= status["cache_capacity_bytes"]
    entry = tier.store.get(BUCKET, "a")
    assert entry is not None and env.cache_files() == {entry.segments[0].file}
    # Backpressure: a writer waiting for room succeeds once the flusher made some.
    waiting = asyncio.create_task(
        tier.put_object(BUCKET, "b", body(payload(30_000, 2)), meta=META))
    await until(lambda: tier.store.space.waiters > 0, "the writer waits for room")
    env.repair_bucket()
    info = await waiting
    assert info.etag == md5(payload(30_000, 2))
    await tier.wait_flushed()
    backend = env.backend()
    assert await read_all(await backend.get_object(BUCKET, "a")) == payload(30_000, 1)
    assert await read_all(await backend.get_object(BUCKET, "b")) == payload(30_000, 2)


async def test_object_larger_than_cache_streams_to_backend(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, capacity=20_000))
    big = payload(100_000, 7)
    # Size unknown: the body turns out too large while it streams.
    info = await tier.put_object(BUCKET, "big", body(big), meta=META)
    assert info.etag == md5(big)
    assert tier.store.get(BUCKET, "big") is None
    assert tier.status()["cache_used_bytes"] == 0 and env.cache_files() == set()
    backend = env.backend()
    assert await read_all(await backend.get_object(BUCKET, "big")) == big
    # Size known in advance.
    info = await tier.put_object(BUCKET, "big2", body(big), meta=META, size_hint=len(big))
    assert await read_all(await tier.get_object(BUCKET, "big2")) == big
    assert tier.status()["cache_used_bytes"] == 0  # too large to keep a read copy


async def test_large_object_waits_for_older_dirty_version(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, capacity=20_000))
    await tier.put_object(BUCKET, "k", body(b"small dirty"), meta=META)
    big = payload(50_000, 9)
    await tier.put_object(BUCKET, "k", body(big), meta=META)
    await tier.wait_flushed()
    assert await read_all(await env.backend().get_object(BUCKET, "k")) == big
    assert await read_all(await tier.get_object(BUCKET, "k")) == big


async def test_many_concurrent_writers_never_exceed_capacity(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, capacity=60_000,
                                         backpressure_timeout_s=30))
    peak = 0

    async def watch() -> None:
        nonlocal peak
        while True:
            peak = max(peak, tier.status()["cache_used_bytes"])
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    data = {f"k{i}": payload(9_000, i) for i in range(20)}
    refused = 0

    async def put(key: str, value: bytes) -> None:
        nonlocal refused
        while True:  # as a client does: retry after SlowDown
            try:
                await tier.put_object(BUCKET, key, body(value), meta=META)
                return
            except SlowDown:
                refused += 1
                await asyncio.sleep(0.01)

    await asyncio.gather(*(put(k, v) for k, v in data.items()))
    watcher.cancel()
    assert 0 < peak <= 60_000
    assert tier.status()["slowdowns"] == refused
    await tier.wait_flushed()
    backend = env.backend()
    for k, v in data.items():
        assert await read_all(await backend.get_object(BUCKET, k)) == v
