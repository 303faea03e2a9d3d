"""On-disk formats: data files, volume markers, the index; recovery on start."""

from __future__ import annotations

import json
import struct

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from backends.core.errors import InvalidKey, KeyTooLong, ServiceUnavailable
from backends.direct_io import MIN_DIRECT
from gateway.cache.index import INDEX_VERSION
from gateway.cache.settings import CacheSettings
from gateway.cache.volumes import HEADER_SIZE, MAGIC, VOLUME_MARKER
from tests.gateway.cache.conftest import (
    BUCKET,
    META,
    Env,
    body,
    cache_settings,
    payload,
    read_all,
)
from tests.support.page_cache import resident_pages, writes_direct


def files_only(env: Env) -> CacheSettings:
    """Settings under which every body goes to a data file (no inline records)."""
    return cache_settings(env.base, inline_max_bytes=0)


async def test_data_file_layout(env: Env) -> None:
    tier = await env.tier(files_only(env))
    data = payload(5000)
    await tier.put_object(BUCKET, "k", body(data), meta=META)
    (path,) = list(env.base.glob("vol0/data/*/*"))
    raw = path.read_bytes()
    assert raw[:8] == MAGIC and struct.unpack("<H", raw[8:10]) == (1,)
    assert raw[HEADER_SIZE:] == data and len(raw) == HEADER_SIZE + len(data)
    marker = json.loads((env.base / "vol0" / VOLUME_MARKER).read_text())
    assert marker["format"] == "squall-cache-volume" and marker["version"] == 1


@pytest.mark.parametrize("direct_io", [True, False])
async def test_a_large_data_file_holds_its_bytes_its_bulk_past_the_page_cache(
        env: Env, direct_io: bool) -> None:
    if direct_io and not writes_direct(env.base):
        pytest.skip(f"the file system of {env.base} refuses O_DIRECT")
    tier = await env.tier(cache_settings(env.base, capacity=16 << 20, inline_max_bytes=0,
                                         chunk_size=1 << 20, direct_io=direct_io))
    data = payload(3 * (1 << 20) + 4321)
    await tier.put_object(BUCKET, "k", body(data), meta=META)
    (path,) = list(env.base.glob("vol0/data/*/*"))
    raw_size = path.stat().st_size
    bulk = resident_pages(path, 4096, raw_size // 4096 * 4096)  # before any read
    assert path.read_bytes()[HEADER_SIZE:] == data
    assert await read_all(await tier.get_object(BUCKET, "k")) == data
    few = MIN_DIRECT // 4096  # a last batch with less than this aligned is not direct
    assert bulk < few if direct_io else bulk > few


async def test_start_sweeps_orphans_and_keeps_records(env: Env) -> None:
    tier = await env.tier()
    await tier.put_object(BUCKET, "k", body(b"kept"), meta=META)
    await env.close(tier)
    vol = env.base / "vol0"
    (vol / "tmp" / "deadbeef.tmp").write_bytes(b"half a write")
    (vol / "data" / "ab").mkdir(exist_ok=True)
    (vol / "data" / "ab" / "abcdef").write_bytes(MAGIC + b"\0" * 8 + b"orphan")
    tier = await env.tier(create_bucket=False)
    assert await read_all(await tier.get_object(BUCKET, "k")) == b"kept"
    assert not (vol / "tmp" / "deadbeef.tmp").exists()
    assert not (vol / "data" / "ab" / "abcdef").exists()
    assert tier.status()["cache_used_bytes"] == HEADER_SIZE + 4


async def test_corrupt_header_is_an_error_not_wrong_bytes(env: Env) -> None:
    tier = await env.tier(files_only(env))
    await tier.put_object(BUCKET, "k", body(b"data"), meta=META)
    (path,) = list(env.base.glob("vol0/data/*/*"))
    path.write_bytes(b"XXXXXXXX" + path.read_bytes()[8:])
    stream = await tier.get_object(BUCKET, "k")
    with pytest.raises(ServiceUnavailable):
        await read_all(stream)


async def test_missing_file_of_dirty_record_refuses_to_start(env: Env) -> None:
    tier = await env.tier(files_only(env))
    env.break_bucket()
    await tier.put_object(BUCKET, "k", body(b"unflushed"), meta=META)
    await env.close(tier)
    for path in env.base.glob("vol0/data/*/*"):
        path.unlink()
    with pytest.raises(ServiceUnavailable, match="missing"):
        await env.tier(create_bucket=False)


async def test_missing_file_of_clean_record_is_forgotten(env: Env) -> None:
    tier = await env.tier(files_only(env))
    await tier.put_object(BUCKET, "k", body(b"flushed"), meta=META)
    await tier.wait_flushed()
    await env.close(tier)
    for path in env.base.glob("vol0/data/*/*"):
        path.unlink()
    tier = await env.tier(create_bucket=False)
    assert tier.store.get(BUCKET, "k") is None
    assert await read_all(await tier.get_object(BUCKET, "k")) == b"flushed"  # from backend


async def test_unsupported_index_version(env: Env) -> None:
    from rocksdict import Options, Rdict

    tier = await env.tier()
    await env.close(tier)
    db = Rdict(str(env.index_path), Options(raw_mode=True))
    db[b"F"] = json.dumps({"format": "squall-cache-index",
                           "version": INDEX_VERSION + 1}).encode()
    db.close()
    with pytest.raises(ServiceUnavailable, match="unsupported"):
        await env.tier(create_bucket=False)


async def test_invalid_keys_are_refused_before_ack(env: Env) -> None:
    tier = await env.tier()
    with pytest.raises(InvalidKey):
        await tier.put_object(BUCKET, "", body(b"x"), meta=META)
    with pytest.raises(KeyTooLong):
        await tier.put_object(BUCKET, "k" * 1025, body(b"x"), meta=META)
    with pytest.raises(InvalidKey):
        await tier.delete_object(BUCKET, "bad\udcff")
    assert tier.status()["dirty_objects"] == 0


async def test_cache_tier_without_capacity_is_refused(env: Env) -> None:
    from gateway.cache.settings import CacheSettings
    from gateway.cache.tier import CacheTier

    with pytest.raises(ValueError, match="capacity"):
        CacheTier(env.backend(), CacheSettings(), index_path=env.index_path)


async def test_status_and_metrics(env: Env) -> None:
    registry = CollectorRegistry()
    tier = await env.tier(registry=registry)
    env.break_bucket()
    await tier.put_object(BUCKET, "k", body(b"x" * 100), meta=META)
    status = tier.status()
    for field in ("dirty_bytes", "cache_used_bytes", "cache_capacity_bytes",
                  "oldest_dirty_age_s", "flush_phase", "flush_bytes_total", "hits", "misses",
                  "evictions"):
        assert field in status
    assert status["dirty_bytes"] == 100 and status["flush_phase"] in ("idle", "phase1")
    text = generate_latest(registry).decode()
    assert "squall_cache_dirty_bytes 100.0" in text
    assert "squall_cache_capacity_bytes 1.048576e+06" in text
    assert "squall_cache_hits_total 0.0" in text
    assert 'squall_cache_flush_phase{phase="phase2"} 0.0' in text
    env.repair_bucket()
    await tier.wait_flushed()
    assert "squall_cache_flush_bytes_total 100.0" in generate_latest(registry).decode()
