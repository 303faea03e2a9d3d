"""The flusher: failures and recovery, newest-state-wins races, wait_flushed."""

from __future__ import annotations

import pytest

from backends.core.errors import NoSuchKey
from backends.throttled import ThrottleSettings
from gateway.cache.entry import EntryState
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


async def test_backend_failure_then_restored_loses_nothing(env: Env) -> None:
    tier = await env.tier()
    env.break_bucket()
    data = {f"k{i}": payload(7_000, i) for i in range(5)}
    for k, v in data.items():
        await tier.put_object(BUCKET, k, body(v), meta=META)
    await tier.delete_object(BUCKET, "k0")
    await until(lambda: tier.status()["flush_errors_total"] >= 3, "flush attempts fail")
    assert tier.status()["dirty_objects"] == 5
    for k in ("k1", "k4"):  # still served from the cache meanwhile
        assert await read_all(await tier.get_object(BUCKET, k)) == data[k]
    env.repair_bucket()
    await tier.wait_flushed()
    backend = env.backend()
    with pytest.raises(NoSuchKey):
        await backend.head_object(BUCKET, "k0")
    for k in ("k1", "k2", "k3", "k4"):
        assert await read_all(await backend.get_object(BUCKET, k)) == data[k]
    assert tier.status()["dirty_bytes"] == 0


async def _flushing(tier, key: str) -> bool:
    entry = tier.store.get(BUCKET, key)
    return entry is not None and entry.state is EntryState.FLUSHING


async def test_overwrite_while_flushing_newest_wins(env: Env) -> None:
    slow = env.backend(ThrottleSettings(bandwidth_bytes_per_s=400_000))
    tier = await env.tier(inner=slow)
    old, new = payload(200_000, 1), payload(1_000, 2)
    await tier.put_object(BUCKET, "k", body(old), meta=META)
    await until(lambda: _flushing(tier, "k"), "the old version is being flushed")
    await tier.put_object(BUCKET, "k", body(new), meta=META)
    entry = tier.store.get(BUCKET, "k")
    assert entry is not None and entry.state is EntryState.DIRTY  # the in-flight flush cannot clean it
    await tier.wait_flushed()
    backend = env.backend()
    assert await read_all(await backend.get_object(BUCKET, "k")) == new
    assert await read_all(await tier.get_object(BUCKET, "k")) == new
    entry = tier.store.get(BUCKET, "k")
    assert entry is not None and entry.state is EntryState.CLEAN


async def test_delete_while_flushing_is_propagated(env: Env) -> None:
    slow = env.backend(ThrottleSettings(bandwidth_bytes_per_s=400_000))
    tier = await env.tier(inner=slow)
    await tier.put_object(BUCKET, "k", body(payload(200_000)), meta=META)
    await until(lambda: _flushing(tier, "k"), "the version is being flushed")
    await tier.delete_object(BUCKET, "k")
    with pytest.raises(NoSuchKey):
        await tier.head_object(BUCKET, "k")
    assert [i.key async for i in tier.iter_objects(BUCKET)] == []
    await tier.wait_flushed()
    with pytest.raises(NoSuchKey):
        await env.backend().head_object(BUCKET, "k")
    assert tier.store.get(BUCKET, "k") is None
    assert tier.status()["cache_used_bytes"] == 0 and env.cache_files() == set()


async def test_wait_flushed_reports_progress_per_bucket(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base))
    await tier.create_bucket("other")
    env.break_bucket()  # keep BUCKET's data dirty
    await tier.put_object(BUCKET, "stuck", body(b"x" * 100), meta=META)
    for i in range(3):
        await tier.put_object("other", f"k{i}", body(payload(10_000, i)), meta=META)
    seen: list[tuple[int, int]] = []
    await tier.wait_flushed("other", progress=lambda d, t: seen.append((d, t)))
    assert seen and seen[-1][0] == seen[-1][1] <= 30_000
    assert all(t == seen[0][1] for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    stuck = tier.store.get(BUCKET, "stuck")
    assert stuck is not None and stuck.dirty
    env.repair_bucket()
    await tier.wait_flushed()
    assert tier.status()["dirty_objects"] == 0
