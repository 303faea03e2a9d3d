"""Elastic capacity on a real tier: volumes attached by a real LocalProvisioner during a
burst, sized from experience, drained, detached; found again after a restart."""

from __future__ import annotations

from typing import Any

from backends.throttled import ThrottleSettings
from gateway.cache.provisioner import LocalProvisioner
from gateway.cache.settings import ElasticSettings
from gateway.cache.tier import CacheTier
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

KiB = 1024
RATE = 1_000_000.0  # backend bytes/s; UT x B x window = 0.3 x 1e6 x 0.02 s = 6 kB


async def elastic_tier(env: Env, **overrides: Any) -> CacheTier:
    settings = cache_settings(env.base, volumes=0, inactivity_delay_s=0.2)
    elastic = ElasticSettings(root=env.base / "vols", initial_size_bytes=overrides.pop(
        "initial", 4 << 20), min_size_bytes=64 * KiB, granularity_bytes=64 * KiB,
        volume_bandwidth_bytes_per_s=50e6)
    inner = env.backend(ThrottleSettings(bandwidth_bytes_per_s=RATE))
    return await env.tier(settings, inner=inner, backend_bandwidth=RATE,
                          provisioner=LocalProvisioner(env.base / "vols"), elastic=elastic)


def volumes(tier: CacheTier) -> list[dict[str, Any]]:
    return tier.status()["cache_volumes"]


def detached(tier: CacheTier) -> bool:
    return not volumes(tier) and tier.status()["elastic"]["state"] == "idle"


async def test_burst_attaches_then_detaches_and_learns_the_size(env: Env) -> None:
    tier = await elastic_tier(env)
    events: list[int] = []
    tier.volume_listeners.append(lambda: events.append(tier.store.space.capacity))
    status = tier.status()
    assert status["cache_mode"] == "elastic" and status["cache_capacity_bytes"] == 0

    # No burst: a small write goes straight to the backend; no volume is attached
    # (a write of unknown length is taken as large).
    await tier.put_object(BUCKET, "small", body(b"x" * 100), meta=META, size_hint=100)
    assert volumes(tier) == [] and tier.store.get(BUCKET, "small") is None
    assert tier.status()["writearound_bytes_total"] == 100

    # A large write is a burst: a volume is attached before it is cached.
    data = payload(300_000)
    await tier.put_object(BUCKET, "big", body(data), meta=META, size_hint=len(data))
    (vol,) = volumes(tier)
    assert vol["size_bytes"] == 4 << 20 and vol["bandwidth_bytes_per_s"] == 50e6
    assert vol["state"] == "active" and vol["attached_since"] > 0
    assert tier.store.get(BUCKET, "big") is not None  # cached
    assert (env.base / "vols" / vol["id"]).is_dir()
    limiter = tier.store.space.active_volumes[0].limiter
    assert limiter.rate == 50e6 and limiter.consumed >= len(data)  # the B_c cap

    await until(lambda: detached(tier), "drained and detached")
    assert not list((env.base / "vols").iterdir())
    assert await read_all(await tier.get_object(BUCKET, "big")) == data
    assert await read_all(await env.backend().get_object(BUCKET, "big")) == data
    (burst,) = tier.status()["elastic"]["bursts"]
    assert burst["size_bytes"] == 4 << 20 and burst["forced_bytes"] == 0
    assert burst["used_peak_bytes"] == 300_016  # one data file: header + payload
    assert burst["attached_at"] <= burst["ended_at"] <= burst["detached_at"]
    assert events[:2] == [0, 4 << 20] and events[-1] == 0  # M(t) around each change

    # The next burst gets what the last one used (rounded up to 64 KiB).
    assert tier.status()["elastic"]["next_size_bytes"] == 5 * 64 * KiB
    await tier.put_object(BUCKET, "big2", body(payload(200_000, 2)), meta=META,
                          size_hint=200_000)
    assert [v["size_bytes"] for v in volumes(tier)] == [5 * 64 * KiB]
    await until(lambda: detached(tier), "second volume detached")
    assert tier.status()["elastic"]["detaches_total"] == 2


async def test_draining_volume_takes_no_new_writes_until_demand_returns(env: Env) -> None:
    tier = await elastic_tier(env)
    await tier.create_bucket("other")
    env.break_bucket()  # BUCKET's data cannot leave the cache: the volume stays dirty
    await tier.put_object(BUCKET, "stuck", body(payload(50_000)), meta=META, size_hint=50_000)
    await until(lambda: tier.status()["elastic"]["state"] == "draining", "burst over")
    assert volumes(tier)[0]["state"] == "retiring" and tier.write_around

    # Phase 2: a small write bypasses the retiring volume.
    await tier.put_object("other", "k", body(b"around"), meta=META, size_hint=6)
    assert tier.store.get("other", "k") is None
    # A large one is demand again: the burst resumes on the same volume.
    await tier.put_object("other", "big", body(payload(40_000, 3)), meta=META,
                          size_hint=40_000)
    assert tier.status()["elastic"]["state"] == "burst"
    assert volumes(tier)[0]["state"] == "active"
    assert tier.store.get("other", "big") is not None

    env.repair_bucket()
    await until(lambda: detached(tier), "detached once clean")
    assert tier.status()["elastic"]["attaches_total"] == 1
    for bucket, key, size, seed in ((BUCKET, "stuck", 50_000, 0), ("other", "big", 40_000, 3)):
        got = await read_all(await env.backend().get_object(bucket, key))
        assert got == payload(size, seed)


async def test_restart_with_an_attached_volume_loses_nothing(env: Env) -> None:
    tier = await elastic_tier(env)
    env.break_bucket()
    data = payload(80_000, 9)
    await tier.put_object(BUCKET, "k", body(data), meta=META, size_hint=len(data))
    (vol,) = volumes(tier)
    await env.close(tier)  # stops with the volume attached and the object unflushed

    tier = await elastic_tier(env)
    (again,) = volumes(tier)  # the provisioner found it; the index replayed
    assert (again["id"], again["size_bytes"]) == (vol["id"], vol["size_bytes"])
    assert tier.status()["elastic"]["state"] == "draining"
    assert await read_all(await tier.get_object(BUCKET, "k")) == data
    env.repair_bucket()
    await until(lambda: detached(tier), "recovered volume drained and detached")
    assert await read_all(await env.backend().get_object(BUCKET, "k")) == data


async def test_too_small_volume_counts_forced_bytes_and_grows(env: Env) -> None:
    tier = await elastic_tier(env, initial=64 * KiB)
    for i in range(4):  # 4 x 40 kB into 64 KiB: flushes must make room
        await tier.put_object(BUCKET, f"k{i}", body(payload(40_000, i)), meta=META,
                              size_hint=40_000)
    await until(lambda: detached(tier), "detached")
    (burst,) = tier.status()["elastic"]["bursts"]
    assert burst["forced_bytes"] > 0
    assert tier.status()["elastic"]["next_size_bytes"] > 64 * KiB
    for i in range(4):
        assert await read_all(await tier.get_object(BUCKET, f"k{i}")) == payload(40_000, i)


async def test_a_volume_with_dirty_or_pinned_data_is_never_removed(env: Env) -> None:
    # One static volume; data files (an inline record has no file for a reader to pin).
    tier = await env.tier(cache_settings(env.base, inline_max_bytes=0))
    store, space = tier.store, tier.store.space
    (vol,) = space.volumes.values()
    env.break_bucket()
    await tier.put_object(BUCKET, "d", body(b"dirty"), meta=META)
    assert not space.volume_idle(vol) and not await space.remove_volume(vol)
    env.repair_bucket()
    await tier.wait_flushed()
    stream = await tier.get_object(BUCKET, "d")  # a reader pins the clean file
    assert not await space.remove_volume(vol)
    assert await read_all(stream) == b"dirty"
    assert await space.remove_volume(vol)  # clean, unpinned: its records are dropped
    assert store.get(BUCKET, "d") is None and not space.volumes
    assert await read_all(await tier.get_object(BUCKET, "d")) == b"dirty"  # the backend's


async def test_no_write_of_a_burst_goes_past_its_volume_as_a_probe(env: Env) -> None:
    """Static admission sends one large write past the cache every few seconds to measure
    the backend; in a burst on an elastic volume that write would be missing from the
    volume's peak and the next volume would be too small by it. The backend is measured
    by the flushes instead: every write of the burst is cached."""
    settings = cache_settings(env.base, volumes=0, inactivity_delay_s=5.0, admission="auto")
    elastic = ElasticSettings(root=env.base / "vols", initial_size_bytes=4 << 20,
                              min_size_bytes=64 * KiB, granularity_bytes=64 * KiB)
    tier = await env.tier(settings, provisioner=LocalProvisioner(env.base / "vols"),
                          elastic=elastic)  # an unthrottled backend, B not declared
    for i in range(6):
        await tier.put_object(BUCKET, f"ckpt{i}", body(payload(300_000, i)), meta=META,
                              size_hint=300_000)
        assert tier.store.get(BUCKET, f"ckpt{i}") is not None, f"ckpt{i} went past"
    assert tier.admission.routed_to_backend == 0


async def checkpoint(tier: CacheTier, step: int, files: int = 4) -> None:
    """One checkpoint: ``files`` writes of 300 kB, then quiet until its volume detached."""
    for i in range(files):
        await tier.put_object(BUCKET, f"ckpt{step}/rank{i}", body(payload(300_000, i)),
                              meta=META, size_hint=300_000)
    await until(lambda: detached(tier), f"checkpoint {step} drained and detached")


async def test_identical_checkpoints_get_the_same_volume(env: Env) -> None:
    """The volume learned from one checkpoint is the volume of the next, and stays the
    same while the checkpoints do: 4 x 300 kB plus 1/64 headroom, rounded to 64 KiB."""
    tier = await elastic_tier(env)
    for step in range(3):
        await checkpoint(tier, step)
    bursts = tier.status()["elastic"]["bursts"]
    assert [b["size_bytes"] for b in bursts] == [4 << 20, 19 * 64 * KiB, 19 * 64 * KiB]
    assert [b["needed_bytes"] for b in bursts] == [1_200_000] * 3
    assert tier.status()["elastic"]["next_size_bytes"] == 19 * 64 * KiB


async def test_writes_sent_past_the_volume_by_choice_still_size_the_next_one(
        env: Env) -> None:
    """Half a checkpoint goes past the volume because the backend is measured as fast as
    the cache: the volume's peak holds half the checkpoint, but the next volume is sized
    for all of it (the next checkpoint may well be cached whole)."""
    settings = cache_settings(env.base, volumes=0, inactivity_delay_s=0.2, admission="auto")
    elastic = ElasticSettings(root=env.base / "vols", initial_size_bytes=4 << 20,
                              min_size_bytes=64 * KiB, granularity_bytes=64 * KiB)
    tier = await env.tier(settings, provisioner=LocalProvisioner(env.base / "vols"),
                          elastic=elastic)
    for i in range(2):
        await tier.put_object(BUCKET, f"ckpt/rank{i}", body(payload(300_000, i)), meta=META,
                              size_hint=300_000)
    # Stands in for a backend measured as fast as the cache (the measurement, not a mock:
    # the real admission rule then routes the next writes past the volume by choice).
    now = tier.store.now()
    for _ in range(50):
        tier.admission.observe_backend(300_000, 1e-4, now, flush=True)
        tier.admission.observe_backend(300_000, 1e-4, now)
    for i in range(2, 4):
        await tier.put_object(BUCKET, f"ckpt/rank{i}", body(payload(300_000, i)), meta=META,
                              size_hint=300_000)
    assert tier.admission.routed_to_backend == 2
    await until(lambda: detached(tier), "drained and detached")
    (burst,) = tier.status()["elastic"]["bursts"]
    assert burst["used_peak_bytes"] < 700_000  # two files resident, not four
    assert burst["needed_bytes"] == 1_200_000
    assert tier.status()["elastic"]["next_size_bytes"] == 19 * 64 * KiB
