"""Small objects inline in the index: no data file, read from memory, flushed, evicted,
counted like files, recovered on start; the memory budget sends the rest to files."""

from __future__ import annotations

import gc
import hashlib

import pytest

from backends.core.base import CompletedPart, RangeRequest
from backends.core.errors import BadDigest, NoSuchKey
from gateway.cache.inline import InlinePayload
from gateway.cache.readers import MemoryBody, entry_stream
from gateway.cache.volumes import charge
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

KiB = 1024
LIMIT = 64 * KiB


def inline_of(tier, key: str) -> bool:  # type: ignore[no-untyped-def]
    entry = tier.store.get(BUCKET, key)
    return entry is not None and all(s.inline is not None for s in entry.segments)


async def test_small_put_is_inline_and_read_from_memory(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, capacity=8 << 20))
    data = payload(LIMIT)
    info = await tier.put_object(BUCKET, "small", body(data, 4 * KiB), meta=META)
    assert info.etag == md5(data)
    assert inline_of(tier, "small") and env.cache_files() == set()
    assert tier.status()["cache_used_bytes"] == charge(LIMIT)  # charged like a file
    entry = tier.store.get(BUCKET, "small")
    assert entry is not None
    assert isinstance(aiter(entry_stream(tier.store, entry, None)), MemoryBody)  # no pin
    assert await read_all(await tier.get_object(BUCKET, "small")) == data
    ranged = await tier.get_object(BUCKET, "small", byte_range=RangeRequest(5000, 9999))
    assert await read_all(ranged) == data[5000:10000]
    assert (await tier.head_object(BUCKET, "small")).size == LIMIT
    # One byte more is a data file.
    await tier.put_object(BUCKET, "big", body(payload(LIMIT + 1), 4 * KiB), meta=META)
    assert not inline_of(tier, "big") and len(env.cache_files()) == 1


async def test_empty_body_is_inline(env: Env) -> None:
    tier = await env.tier()
    await tier.put_object(BUCKET, "empty", body(b""), meta=META)
    assert inline_of(tier, "empty") and env.cache_files() == set()
    assert await read_all(await tier.get_object(BUCKET, "empty")) == b""


async def test_inline_disabled_writes_files(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, inline_max_bytes=0))
    await tier.put_object(BUCKET, "k", body(b"tiny"), meta=META)
    assert not inline_of(tier, "k") and len(env.cache_files()) == 1


async def test_bad_digest_keeps_nothing(env: Env) -> None:
    tier = await env.tier()
    with pytest.raises(BadDigest):
        await tier.put_object(BUCKET, "k", body(b"abc"), meta=META,
                              content_md5=hashlib.md5(b"xyz").digest())
    assert tier.store.get(BUCKET, "k") is None
    assert tier.status()["cache_used_bytes"] == 0
    ok = await tier.put_object(BUCKET, "k", body(b"abc"), meta=META,
                               content_md5=hashlib.md5(b"abc").digest())
    assert ok.etag == md5(b"abc")


async def test_overwrite_and_delete_give_space_and_memory_back(env: Env) -> None:
    tier = await env.tier()
    budget = tier.store.index.inline

    async def memory(n: int) -> None:  # a flush in flight holds its record a while
        await until(lambda: gc.collect() >= 0 and budget.used == n, f"inline memory {n}")

    await tier.put_object(BUCKET, "k", body(payload(3000)), meta=META)
    assert budget.used == 3000 and tier.status()["cache_used_bytes"] == charge(3000)
    await tier.put_object(BUCKET, "k", body(payload(1000, 1)), meta=META)
    assert tier.status()["cache_used_bytes"] == charge(1000)
    await memory(1000)
    await tier.put_object(BUCKET, "k", body(payload(100_000, 2), 8 * KiB), meta=META)
    assert len(env.cache_files()) == 1  # inline -> file
    await memory(0)
    await tier.put_object(BUCKET, "k", body(b"again"), meta=META)
    await until(lambda: env.cache_files() == set(), "file -> inline: the file is gone")
    await tier.delete_object(BUCKET, "k")
    assert tier.status()["cache_used_bytes"] == 0
    await memory(0)
    await tier.wait_flushed()
    with pytest.raises(NoSuchKey):
        await env.backend().head_object(BUCKET, "k")


async def test_flush_of_inline_data_and_clean_records_stay_readable(env: Env) -> None:
    tier = await env.tier()
    datas = {f"k{i}": payload(100 * i + 1, i) for i in range(20)}
    for key, data in datas.items():
        await tier.put_object(BUCKET, key, body(data, 50), meta=META)
    await tier.wait_flushed()
    backend = env.backend()
    for key, data in datas.items():
        assert (await backend.head_object(BUCKET, key)).etag == md5(data)
        assert await read_all(await backend.get_object(BUCKET, key)) == data
        assert inline_of(tier, key) and not tier.store.get(BUCKET, key).dirty  # type: ignore[union-attr]
        assert await read_all(await tier.get_object(BUCKET, key)) == data


async def test_clean_inline_records_are_evicted_for_room(env: Env) -> None:
    capacity = 200 * KiB
    tier = await env.tier(cache_settings(env.base, capacity=capacity))
    for i in range(8):  # 8 x 20 kB inline (the budget is 25 KiB: later ones are files)
        await tier.put_object(BUCKET, f"k{i}", body(payload(20_000, i)), meta=META)
    await tier.wait_flushed()
    await tier.put_object(BUCKET, "large", body(payload(150_000, 99), 8 * KiB), meta=META)
    status = tier.status()
    assert status["evictions"] > 0 and status["cache_used_bytes"] <= capacity
    for i in range(8):  # from the cache or, once evicted, from the backend
        assert await read_all(await tier.get_object(BUCKET, f"k{i}")) == payload(20_000, i)


async def test_memory_budget_sends_small_bodies_to_files(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, capacity=800 * KiB))  # budget: 100 KiB
    for i in range(6):
        await tier.put_object(BUCKET, f"k{i}", body(payload(30_000, i)), meta=META)
    inline = [inline_of(tier, f"k{i}") for i in range(6)]
    assert inline == [True, True, True, False, False, False]
    assert tier.store.index.inline.used == 90_000


async def test_inline_records_survive_a_restart(env: Env) -> None:
    tier = await env.tier()
    env.break_bucket()
    await tier.put_object(BUCKET, "dirty", body(b"not flushed yet"), meta=META)
    await env.close(tier)
    env.repair_bucket()
    tier = await env.tier(create_bucket=False)
    assert inline_of(tier, "dirty") and tier.status()["dirty_objects"] == 1
    assert tier.status()["cache_used_bytes"] == charge(len(b"not flushed yet"))
    assert tier.store.index.inline.used == len(b"not flushed yet")
    assert await read_all(await tier.get_object(BUCKET, "dirty")) == b"not flushed yet"
    await tier.wait_flushed()
    assert await read_all(await env.backend().get_object(BUCKET, "dirty")) == \
        b"not flushed yet"


async def test_inline_record_of_a_removed_volume_moves_to_another(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, volumes=2))
    env.break_bucket()
    for i in range(4):
        await tier.put_object(BUCKET, f"k{i}", body(payload(500, i)), meta=META)
    await env.close(tier)
    # vol0 leaves the configuration: its inline records need no file, only a volume.
    settings = cache_settings(env.base, volumes=2)
    settings = settings.model_copy(update={"volumes": settings.volumes[1:]})
    tier = await env.tier(settings, create_bucket=False)
    (vol,) = tier.store.space.volumes.values()
    for i in range(4):
        entry = tier.store.get(BUCKET, f"k{i}")
        assert entry is not None and entry.segments[0].volume == vol.id
        assert await read_all(await tier.get_object(BUCKET, f"k{i}")) == payload(500, i)
    assert vol.used == 4 * charge(500)
    await env.close(tier)
    tier = await env.tier(settings, create_bucket=False)  # the move was written down
    assert tier.store.space.volumes[vol.id].used == 4 * charge(500)


async def test_multipart_with_inline_parts(env: Env) -> None:
    tier = await env.tier()
    up = await tier.create_multipart_upload(BUCKET, "mp", meta=META)
    datas = [payload(5 * KiB, 1), payload(5 * KiB, 2), payload(700, 3)]
    infos = [await tier.upload_part(BUCKET, "mp", up.upload_id, n, body(d))
             for n, d in enumerate(datas, start=1)]
    assert env.cache_files() == set()  # every part inline
    done = await tier.complete_multipart_upload(
        BUCKET, "mp", up.upload_id, [CompletedPart(p.part_number, p.etag) for p in infos])
    whole = b"".join(datas)
    assert inline_of(tier, "mp")
    assert await read_all(await tier.get_object(BUCKET, "mp")) == whole
    part = await tier.get_object(BUCKET, "mp", byte_range=RangeRequest(5000, 10_300))
    assert await read_all(part) == whole[5000:10_301]
    await tier.wait_flushed()
    backend = env.backend()
    assert (await backend.head_object(BUCKET, "mp")).etag == done.etag
    assert await read_all(await backend.get_object(BUCKET, "mp")) == whole
    await env.close(tier)
    tier = await env.tier(create_bucket=False)
    assert await read_all(await tier.get_object(BUCKET, "mp")) == whole


async def test_inline_with_durability_none(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, durability="none"))
    await tier.put_object(BUCKET, "k", body(b"quick"), meta=META)
    assert inline_of(tier, "k")
    await env.close(tier)
    tier = await env.tier(cache_settings(env.base, durability="none"), create_bucket=False)
    assert await read_all(await tier.get_object(BUCKET, "k")) == b"quick"


def test_memory_body_iterates_and_closes() -> None:
    import asyncio

    async def run() -> None:
        it = MemoryBody([b"a", b"b"])
        assert [c async for c in it] == [b"a", b"b"]
        it = MemoryBody([b"a", b"b"])
        await it.aclose()
        assert [c async for c in it] == []
        assert len(InlinePayload(b"xyz")) == 3
    asyncio.run(run())


async def test_a_reader_keeps_its_bytes_when_the_record_changes(env: Env) -> None:
    tier = await env.tier()
    await tier.put_object(BUCKET, "k", body(b"first version"), meta=META)
    stream = await tier.get_object(BUCKET, "k")
    await tier.put_object(BUCKET, "k", body(b"second"), meta=META)
    await tier.delete_object(BUCKET, "k")
    assert await read_all(stream) == b"first version"
    assert stream.info.etag == md5(b"first version")
    with pytest.raises(NoSuchKey):
        await tier.get_object(BUCKET, "k")


async def test_small_writes_stay_inline_when_the_backend_measures_faster(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, capacity=8 << 20, admission="auto"))
    tier.admission.observe_cache(4 * KiB, 10.0, now=tier.store.now())  # a slow cache ...
    tier.admission.observe_backend(4 * KiB, 0.001, now=tier.store.now())  # ... and backend
    assert tier.admission.prefer_backend(4 * KiB, tier.store.now() + 1)
    await tier.put_object(BUCKET, "small", body(payload(4 * KiB)), meta=META,
                          size_hint=4 * KiB)
    assert inline_of(tier, "small")  # one shared index sync beats a backend file


async def test_a_small_miss_is_copied_inline(env: Env) -> None:
    tier = await env.tier()
    data = payload(4 * KiB, 3)
    await env.backend().put_object(BUCKET, "k", body(data), meta=META)
    assert await read_all(await tier.get_object(BUCKET, "k")) == data  # a miss, copied
    assert inline_of(tier, "k") and env.cache_files() == set()
    assert tier.status()["read_copies_total"] == 1
    assert tier.store.index.inline.used == len(data)
    assert await read_all(await tier.get_object(BUCKET, "k")) == data  # from memory
    assert tier.store.stats.hits == 1


async def test_a_small_miss_read_in_part_or_changed_meanwhile_is_not_kept(env: Env) -> None:
    tier = await env.tier()
    await env.backend().put_object(BUCKET, "k", body(payload(4 * KiB, 4)), meta=META)
    stream = await tier.get_object(BUCKET, "k")
    await aiter(stream).__anext__()
    await tier.put_object(BUCKET, "k", body(b"newer"), meta=META)  # written meanwhile
    await read_all(stream)
    assert await read_all(await tier.get_object(BUCKET, "k")) == b"newer"
    assert tier.status()["read_copies_total"] == 0
    assert tier.status()["cache_used_bytes"] == charge(len(b"newer"))
