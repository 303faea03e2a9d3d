"""SIGKILL at chosen moments, then a new CacheTier on the same volumes and index must
serve every acknowledged write with the right bytes and finish flushing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backends.core.base import CompletedPart
from backends.core.errors import NoSuchKey
from gateway.cache.volumes import charge
from tests.gateway.cache.conftest import (
    BUCKET,
    Env,
    cache_settings,
    md5,
    payload,
    posix_backend,
    read_all,
)

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.timeout(120)


async def run_child(env: Env, cfg: dict[str, Any],
                    kill_when: Callable[[list[list[str]]], bool]) -> list[list[str]]:
    """Start the child, read its report lines, SIGKILL it once ``kill_when(lines)``."""
    settings = cache_settings(env.base, **cfg.pop("settings", {}))
    cfg.update(backend_root=str(env.backend_root), index_path=str(env.index_path),
               settings=json.loads(settings.model_dump_json()))
    cfg_path = env.base / "child.json"
    cfg_path.write_text(json.dumps(cfg))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.gateway.cache.crash_child", str(cfg_path), cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    lines: list[list[str]] = []
    try:
        assert proc.stdout is not None
        while True:
            raw = await asyncio.wait_for(proc.stdout.readline(), 60)
            if not raw:
                err = await proc.stderr.read() if proc.stderr else b""
                raise AssertionError(f"child exited early: {err.decode()[-2000:]}")
            lines.append(raw.decode().split())
            if kill_when(lines):
                break
    finally:
        if proc.returncode is None:
            os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return lines


def acks(lines: list[list[str]]) -> dict[str, tuple[int, int]]:
    """The newest acknowledged (seed, size) per key."""
    out: dict[str, tuple[int, int]] = {}
    for line in lines:
        if line[0] == "ACK":
            out[line[1]] = (int(line[2]), int(line[3]))
    return out


async def check_space(env: Env, tier) -> None:
    """No orphaned files or space: what is on the volumes is what the index references."""
    store = tier.store
    referenced = {s.file for per in [store.entries_of(BUCKET)] for e in per.values()
                  for s in e.segments if s.inline is None}
    parts = [p for u in store.uploads_in() for p in store.parts_of(u.upload_id).values()]
    referenced |= {p.segment.file for p in parts if p.segment.inline is None}
    assert env.cache_files() == referenced
    assert not any((env.base / "vol0" / "tmp").iterdir())
    charged = sum(charge(s.size) for e in store.entries_of(BUCKET).values() for s in e.segments)
    charged += sum(charge(p.size) for p in parts)
    assert tier.status()["cache_used_bytes"] == charged


@pytest.mark.parametrize("kill_after", [1, 4, 9])
async def test_kill_mid_put_stream(env: Env, kill_after: int) -> None:
    lines = await run_child(env, {"mode": "puts", "count": 200, "size": 150_000},
                            lambda ls: sum(1 for x in ls if x[0] == "ACK") >= kill_after)
    acked = acks(lines)
    assert len(acked) == kill_after
    tier = await env.tier(create_bucket=False)
    await check_space(env, tier)
    for key, (seed, size) in acked.items():
        assert await read_all(await tier.get_object(BUCKET, key)) == payload(size, seed)
    # A write in progress at the kill is either absent or complete, never partial.
    nxt = f"k{kill_after}"
    try:
        data = await read_all(await tier.get_object(BUCKET, nxt))
        assert data == payload(150_000, kill_after)
    except NoSuchKey:
        pass
    await tier.wait_flushed()
    backend = posix_backend(env.backend_root)
    for key, (seed, size) in acked.items():
        assert await read_all(await backend.get_object(BUCKET, key)) == payload(size, seed)


async def test_kill_mid_flush_with_throttled_backend(env: Env) -> None:
    cfg = {"mode": "puts", "count": 6, "size": 100_000, "throttle": 150_000,
           "report_flushing": True}
    lines = await run_child(env, cfg, lambda ls: ls[-1][0] == "FLUSHING")
    acked = acks(lines)
    assert len(acked) == 6
    tier = await env.tier(create_bucket=False)
    assert tier.status()["dirty_objects"] >= 1  # the interrupted flush reverted to DIRTY
    await check_space(env, tier)
    for key, (seed, size) in acked.items():
        assert await read_all(await tier.get_object(BUCKET, key)) == payload(size, seed)
    progress: list[tuple[int, int]] = []
    await tier.wait_flushed(progress=lambda d, t: progress.append((d, t)))
    assert progress[-1][0] == progress[-1][1]
    backend = posix_backend(env.backend_root)
    for key, (seed, size) in acked.items():
        info = await backend.head_object(BUCKET, key)
        assert info.etag == md5(payload(size, seed))
        assert await read_all(await backend.get_object(BUCKET, key)) == payload(size, seed)


async def test_kill_during_overwrites_keeps_newest_acknowledged(env: Env) -> None:
    cfg = {"mode": "puts", "count": 500, "size": 20_000, "keys": 3, "throttle": 200_000}
    lines = await run_child(env, cfg,
                            lambda ls: sum(1 for x in ls if x[0] == "ACK") >= 11)
    acked = acks(lines)
    tier = await env.tier(create_bucket=False)
    await check_space(env, tier)
    for key, (seed, size) in acked.items():
        data = await read_all(await tier.get_object(BUCKET, key))
        # The newest acknowledged version, or the one being written when killed.
        assert data in (payload(size, seed), payload(size, seed + 3))
    await tier.wait_flushed()
    backend = posix_backend(env.backend_root)
    for key in acked:
        assert (await read_all(await backend.get_object(BUCKET, key))
                == await read_all(await tier.get_object(BUCKET, key)))


async def test_kill_mid_multipart_then_resume(env: Env) -> None:
    lines = await run_child(env, {"mode": "multipart", "count": 50, "size": 50_000},
                            lambda ls: sum(1 for x in ls if x[0] == "PART") >= 3)
    upload_id = next(x[1] for x in lines if x[0] == "UPLOAD")
    parts = [(int(x[1]), x[2]) for x in lines if x[0] == "PART"]
    tier = await env.tier(create_bucket=False)
    await check_space(env, tier)
    stored = await tier.list_parts(BUCKET, "mp", upload_id)
    assert [(p.part_number, p.etag) for p in stored][:len(parts)] == parts
    info = await tier.complete_multipart_upload(
        BUCKET, "mp", upload_id, [CompletedPart(n, e) for n, e in parts])
    expected = b"".join(payload(50_000, 1000 + n) for n, _ in parts)
    assert await read_all(await tier.get_object(BUCKET, "mp")) == expected
    await check_space(env, tier)
    await tier.wait_flushed()
    backend = posix_backend(env.backend_root)
    assert (await backend.head_object(BUCKET, "mp")).etag == info.etag
    assert await read_all(await backend.get_object(BUCKET, "mp")) == expected


async def test_kill_after_complete_before_flush(env: Env) -> None:
    cfg = {"mode": "multipart", "count": 3, "size": 50_000, "complete": True,
           "throttle": 1_000}
    lines = await run_child(env, cfg, lambda ls: ls[-1][0] == "COMPLETE")
    etag = lines[-1][1]
    tier = await env.tier(create_bucket=False)
    await check_space(env, tier)
    assert (await tier.head_object(BUCKET, "mp")).etag == etag
    await tier.wait_flushed()
    backend = posix_backend(env.backend_root)
    assert (await backend.head_object(BUCKET, "mp")).etag == etag


async def test_kill_with_pending_deletes(env: Env) -> None:
    cfg = {"mode": "puts", "count": 5, "size": 1000, "iops": 0.2, "delete_after": True}
    lines = await run_child(env, cfg, lambda ls: ls[-1][0] == "DONE")
    assert sum(1 for x in lines if x[0] == "DEL") == 5
    tier = await env.tier(create_bucket=False)
    assert [i.key async for i in tier.iter_objects(BUCKET)] == []
    for i in range(5):
        with pytest.raises(NoSuchKey):
            await tier.head_object(BUCKET, f"k{i}")
    await tier.wait_flushed()
    backend = posix_backend(env.backend_root)
    assert [i.key async for i in backend.iter_objects(BUCKET)] == []
    await check_space(env, tier)


@pytest.mark.parametrize("kill_after", [5, 200])
async def test_kill_mid_concurrent_small_puts(env: Env, kill_after: int) -> None:
    """16 writers at once: their commits share WAL syncs (group commit), the small ones
    are inline records; every acknowledged object survives, none is half there."""
    sizes = [0, 100, 4096, 20_000, 65_536, 70_000]  # inline up to 64 KiB, then files
    capacity = 64 << 20  # inline memory budget: 8 MiB
    cfg = {"mode": "concurrent", "count": 100_000, "size": 0, "sizes": sizes, "writers": 16,
           "settings": {"capacity": capacity}}
    lines = await run_child(env, cfg,
                            lambda ls: sum(1 for x in ls if x[0] == "ACK") >= kill_after)
    acked = acks(lines)
    assert len(acked) >= kill_after
    tier = await env.tier(cache_settings(env.base, capacity=capacity), create_bucket=False)
    await check_space(env, tier)
    store = tier.store
    inline = 0
    for key, (seed, size) in acked.items():
        assert await read_all(await tier.get_object(BUCKET, key)) == payload(size, seed)
        (seg,) = store.get(BUCKET, key).segments  # type: ignore[union-attr]
        assert seg.inline is None or size <= 65_536
        inline += seg.inline is not None
    assert inline >= min(kill_after, 50) // 2  # (a file when the memory budget is full)
    # Writes in flight at the kill: absent, or complete with the right bytes.
    for key, entry in list(store.entries_of(BUCKET).items()):
        n = int(key[1:])
        assert await read_all(await tier.get_object(BUCKET, key)) == \
            payload(sizes[n % len(sizes)], n), key
        assert entry.size == sizes[n % len(sizes)]
    await tier.wait_flushed()
    backend = posix_backend(env.backend_root)
    for key, (seed, size) in list(acked.items())[:50]:
        assert (await backend.head_object(BUCKET, key)).etag == md5(payload(size, seed))
        assert await read_all(await backend.get_object(BUCKET, key)) == payload(size, seed)


async def test_kill_with_inline_overwrites_and_deletes(env: Env) -> None:
    """Inline records replaced by inline ones, by files and by tombstones, then SIGKILL:
    the newest acknowledged state of each key comes back, space included."""
    cfg = {"mode": "puts", "count": 400, "size": 3000, "keys": 4, "iops": 20,
           "delete_after": True}
    lines = await run_child(env, cfg, lambda ls: ls[-1][0] == "DONE")
    tier = await env.tier(create_bucket=False)
    await check_space(env, tier)
    for i in range(4):
        with pytest.raises(NoSuchKey):
            await tier.head_object(BUCKET, f"k{i}")
    assert sum(1 for x in lines if x[0] == "DEL") >= 4
    await tier.wait_flushed()
    await check_space(env, tier)
