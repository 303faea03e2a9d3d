"""Dynamic two-phase writeback end to end, with short delays."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from backends.core.base import CompletedPart
from backends.throttled import ThrottleSettings
from gateway.cache.policy import Phase
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
from tests.support.tmpfs import small_filesystem

RATE = 1_000_000.0


async def test_phases_switch_and_phase2_writes_around(env: Env) -> None:
    inner = env.backend(ThrottleSettings(bandwidth_bytes_per_s=RATE))
    settings = cache_settings(env.base, inactivity_delay_s=0.2, utilization_threshold=0.3,
                              inline_max_bytes=0)  # inline bodies stay cached in phase 2
    tier = await env.tier(settings, inner=inner, backend_bandwidth=RATE)
    await tier.create_bucket("other")
    assert tier.status()["flush_phase"] == "idle"
    backend = env.backend()
    await backend.put_object("other", "c", body(b"old"), meta=META)
    assert await read_all(await tier.get_object("other", "c")) == b"old"  # now cached, clean

    env.break_bucket()  # BUCKET's dirty data cannot leave: the cache stays dirty
    await tier.put_object(BUCKET, "d", body(payload(50_000)), meta=META)
    await until(lambda: tier.policy.phase is Phase.PHASE1, "phase 1 on ingest")
    await until(lambda: tier.policy.phase is Phase.PHASE2, "phase 2 after the quiet delay")
    assert tier.status()["flush_phase"] == "phase2"

    # Phase 2: new writes bypass the cache; a cached copy of the key is invalidated.
    before = tier.status()["writearound_bytes_total"]
    await tier.put_object("other", "c", body(b"new!"), meta=META)
    assert tier.store.get("other", "c") is None
    assert await read_all(await backend.get_object("other", "c")) == b"new!"
    assert await read_all(await tier.get_object("other", "c")) == b"new!"
    assert tier.status()["writearound_bytes_total"] == before + 4

    # Ingest rises above UT x B: back to phase 1.
    await tier.put_object("other", "big", body(payload(300_000, 5)), meta=META)
    await until(lambda: Phase.PHASE1 in list(tier.policy.history)[2:], "phase 1 again")

    env.repair_bucket()
    await until(lambda: tier.policy.phase is Phase.IDLE, "idle once clean")
    assert tier.status()["dirty_bytes"] == 0
    assert await read_all(await backend.get_object(BUCKET, "d")) == payload(50_000)


async def test_phase2_write_to_dirty_key_keeps_order(env: Env) -> None:
    """A key with an unflushed version is written past the cache only after that
    version reached the backend, so the backend ends with the newest bytes."""
    settings = cache_settings(env.base, inactivity_delay_s=0.05, inline_max_bytes=0)
    tier = await env.tier(settings)
    await tier.create_bucket("other")
    env.break_bucket("other")
    await tier.put_object("other", "k", body(b"first"), meta=META)
    await until(lambda: tier.policy.phase is Phase.PHASE2, "phase 2")
    env.repair_bucket("other")
    await tier.put_object("other", "k", body(b"second"), meta=META)
    await tier.wait_flushed()
    assert await read_all(await env.backend().get_object("other", "k")) == b"second"
    assert await read_all(await tier.get_object("other", "k")) == b"second"


async def test_phase2_keeps_small_writes_inline(env: Env) -> None:
    """A stream of small writes is little ingest in bytes: phase 2 must not send them
    to the backend one fsynced file each."""
    tier = await env.tier(cache_settings(env.base, inactivity_delay_s=0.05))
    await tier.create_bucket("other")
    env.break_bucket()  # BUCKET's dirty data cannot leave: the cache stays dirty
    await tier.put_object(BUCKET, "d", body(payload(100_000)), meta=META)
    await until(lambda: tier.policy.phase is Phase.PHASE2, "phase 2")
    await tier.put_object("other", "small", body(b"tiny"), meta=META, size_hint=4)
    entry = tier.store.get("other", "small")
    assert entry is not None and entry.segments[0].inline is not None
    env.repair_bucket()
    await tier.wait_flushed()
    assert await read_all(await env.backend().get_object("other", "small")) == b"tiny"


async def test_phase2_keeps_the_parts_of_a_cached_upload_in_the_cache(env: Env) -> None:
    """An upload begun in the cache keeps its parts there in phase 2: one part written
    around would make the whole upload complete on the backend, its cached parts sent
    there again while the client waits for the completion."""
    tier = await env.tier(cache_settings(env.base, inactivity_delay_s=0.05,
                                         inline_max_bytes=0))
    await tier.create_bucket("other")
    env.break_bucket()  # BUCKET's dirty data cannot leave: the cache stays dirty
    await tier.put_object(BUCKET, "d", body(payload(100_000)), meta=META)
    upload = await tier.create_multipart_upload("other", "ckpt", meta=META)
    parts = [payload(8192, n) for n in range(2)]
    first = await tier.upload_part("other", "ckpt", upload.upload_id, 1, body(parts[0]))
    await until(lambda: tier.policy.phase is Phase.PHASE2, "phase 2")
    around = tier.status()["writearound_bytes_total"]
    second = await tier.upload_part("other", "ckpt", upload.upload_id, 2, body(parts[1]))
    assert tier.status()["writearound_bytes_total"] == around
    assert set(tier.store.parts_of(upload.upload_id)) == {1, 2}
    await tier.complete_multipart_upload(
        "other", "ckpt", upload.upload_id,
        [CompletedPart(1, first.etag), CompletedPart(2, second.etag)])
    entry = tier.store.get("other", "ckpt")
    assert entry is not None and entry.dirty  # completed in the cache, flushed later
    env.repair_bucket()
    await tier.wait_flushed()
    assert await read_all(await env.backend().get_object("other", "ckpt")) == b"".join(parts)


async def test_an_upload_created_in_phase2_takes_the_cache_while_it_has_room(
        env: Env) -> None:
    """The next checkpoint's upload, created while the previous burst drains (phase 2),
    is held in the cache when the cache has room for its parts; on the backend, every
    part would run at the store's speed. With no room left it goes to the backend."""
    tier = await env.tier(cache_settings(env.base, capacity=400_000, inactivity_delay_s=0.05,
                                         inline_max_bytes=0), min_part_size=100_000)
    env.break_bucket()  # BUCKET's dirty data cannot leave: the cache stays dirty
    await tier.create_bucket("other")
    await tier.put_object(BUCKET, "d", body(payload(150_000)), meta=META)
    await until(lambda: tier.policy.phase is Phase.PHASE2, "phase 2")
    roomy = await tier.create_multipart_upload("other", "ckpt-1", meta=META)
    assert tier.store.upload(roomy.upload_id) is not None  # the cache's
    await tier.upload_part("other", "ckpt-1", roomy.upload_id, 1,
                           body(payload(200_000, 1)))
    await until(lambda: tier.policy.phase is Phase.PHASE2, "phase 2 again")
    full = await tier.create_multipart_upload("other", "ckpt-2", meta=META)
    assert tier.store.upload(full.upload_id) is None  # 50,000 B free: not a part's worth
    assert [u.key async for u in tier.iter_multipart_uploads("other")] == ["ckpt-1", "ckpt-2"]
    await tier.abort_multipart_upload("other", "ckpt-2", full.upload_id)
    await tier.abort_multipart_upload("other", "ckpt-1", roomy.upload_id)


def remount(mount: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mount)], check=True)


async def test_phase2_writes_stay_in_the_cache_while_the_backend_fails(env: Env) -> None:
    """A real fault of the whole backend (its file system, a tmpfs, remounted read-only)
    in phase 2: new writes are cached instead of going to the failing backend, and reach
    it once it is writable again."""
    with small_filesystem(env.backend_root, "16m") as mount:
        settings = cache_settings(env.base, inactivity_delay_s=0.2, inline_max_bytes=0)
        tier = await env.tier(settings)
        await asyncio.to_thread(remount, mount, "ro")
        await tier.put_object(BUCKET, "d", body(payload(50_000)), meta=META)
        await until(lambda: tier.policy.phase is Phase.PHASE2, "phase 2 after the quiet delay")
        await until(lambda: tier.backend_failing, "the failing flushes to be seen")
        await tier.put_object(BUCKET, "e", body(b"after"), meta=META)
        cached = tier.store.get(BUCKET, "e")
        assert cached is not None and cached.dirty
        await asyncio.to_thread(remount, mount, "rw")
        await tier.wait_flushed()
        assert not tier.backend_failing
        assert await read_all(await env.backend().get_object(BUCKET, "e")) == b"after"
        await env.close(tier)  # before the file system goes
