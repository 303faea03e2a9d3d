"""CacheTier object operations over a real PosixBackend: write-back, reads, listing."""

from __future__ import annotations

import hashlib

import pytest

from backends.core.base import ObjectMeta, RangeRequest, bare
from backends.core.errors import (
    BadDigest,
    BucketNotEmpty,
    InvalidRange,
    NoSuchBucket,
    NoSuchKey,
    PreconditionFailed,
    SlowDown,
)
from gateway.cache.entry import EntryState
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


async def test_put_is_dirty_then_flushed_with_same_bytes_and_etag(env: Env) -> None:
    tier = await env.tier()
    data = payload(50_000)
    info = await tier.put_object(BUCKET, "a/b", body(data), meta=META)
    assert info.etag == md5(data) and info.size == len(data)
    assert (await tier.head_object(BUCKET, "a/b")).etag == info.etag
    assert await read_all(await tier.get_object(BUCKET, "a/b")) == data
    await tier.wait_flushed()
    entry = tier.store.get(BUCKET, "a/b")
    assert entry is not None and entry.state is EntryState.CLEAN
    backend = env.backend()
    stored = await backend.head_object(BUCKET, "a/b")
    assert stored.etag == info.etag and stored.meta.user == {"k": "v"}
    assert await read_all(await backend.get_object(BUCKET, "a/b")) == data
    assert tier.status()["dirty_bytes"] == 0


async def test_range_reads_from_cache(env: Env) -> None:
    tier = await env.tier()
    data = payload(20_000, seed=3)
    await tier.put_object(BUCKET, "r", body(data), meta=META)
    stream = await tier.get_object(BUCKET, "r", byte_range=RangeRequest(first=100, last=5099))
    assert stream.content_length == 5000
    assert await read_all(stream) == data[100:5100]
    assert await read_all(await tier.get_object(
        BUCKET, "r", byte_range=RangeRequest(suffix=10))) == data[-10:]
    with pytest.raises(InvalidRange):
        await tier.get_object(BUCKET, "r", byte_range=RangeRequest(first=20_000))
    assert tier.status()["hits"] == 2


async def test_bad_inputs(env: Env) -> None:
    tier = await env.tier()
    data = b"hello"
    with pytest.raises(BadDigest):
        await tier.put_object(BUCKET, "k", body(data), meta=META,
                              content_md5=hashlib.md5(b"other").digest())
    with pytest.raises(NoSuchKey):
        await tier.head_object(BUCKET, "k")
    with pytest.raises(NoSuchBucket):
        await tier.put_object("nobucket", "k", body(data), meta=META)
    with pytest.raises(NoSuchKey):
        await tier.get_object(BUCKET, "missing")
    assert tier.status()["cache_used_bytes"] == 0
    assert env.cache_files() == set()


async def test_body_failure_leaves_nothing(env: Env) -> None:
    tier = await env.tier()

    async def broken():
        yield b"x" * 5000
        raise ConnectionResetError("client went away")

    with pytest.raises(ConnectionResetError):
        await tier.put_object(BUCKET, "k", bare(broken()), meta=META)
    assert tier.status()["cache_used_bytes"] == 0
    assert env.cache_files() == set()
    assert not list((env.base / "vol0" / "tmp").iterdir())


async def test_preconditions_against_newest_state(env: Env) -> None:
    tier = await env.tier()
    first = await tier.put_object(BUCKET, "c", body(b"one"), meta=META)
    with pytest.raises(PreconditionFailed):
        await tier.put_object(BUCKET, "c", body(b"two"), meta=META, if_none_match="*")
    with pytest.raises(PreconditionFailed):
        await tier.put_object(BUCKET, "c", body(b"two"), meta=META, if_match="0" * 32)
    with pytest.raises(NoSuchKey):
        await tier.put_object(BUCKET, "nope", body(b"two"), meta=META, if_match=first.etag)
    second = await tier.put_object(BUCKET, "c", body(b"two"), meta=META,
                                   if_match=f'"{first.etag}"')
    assert await read_all(await tier.get_object(BUCKET, "c")) == b"two"
    # Only on the backend (not cached): conditions are checked there.
    backend = env.backend()
    await backend.put_object(BUCKET, "only-backend", body(b"b"), meta=META)
    with pytest.raises(PreconditionFailed):
        await tier.put_object(BUCKET, "only-backend", body(b"x"), meta=META, if_none_match="*")
    # A pending delete makes the key absent for conditions.
    await tier.delete_object(BUCKET, "c")
    await tier.put_object(BUCKET, "c", body(b"three"), meta=META, if_none_match="*")
    assert second.etag != md5(b"three")
    # Failed conditional writes leave no space used beyond the committed objects.
    await tier.wait_flushed()
    assert await read_all(await backend.get_object(BUCKET, "c")) == b"three"


async def test_delete_and_listing_overlay(env: Env) -> None:
    backend = env.backend()
    await backend.create_bucket(BUCKET)
    for key in ("a", "b", "c", "d/1", "d/2"):
        await backend.put_object(BUCKET, key, body(key.encode()), meta=META)
    tier = await env.tier(inner=backend)
    await tier.put_object(BUCKET, "bb", body(b"new"), meta=META)
    await tier.put_object(BUCKET, "c", body(b"changed!"), meta=META)
    await tier.delete_object(BUCKET, "a")
    await tier.delete_object(BUCKET, "never-existed")
    listed = [(i.key, i.size) async for i in tier.iter_objects(BUCKET)]
    assert listed == [("b", 1), ("bb", 3), ("c", 8), ("d/1", 3), ("d/2", 3)]
    assert [i.key async for i in tier.iter_objects(BUCKET, prefix="d/")] == ["d/1", "d/2"]
    assert [i.key async for i in tier.iter_objects(BUCKET, start_after="bb")] == [
        "c", "d/1", "d/2"]
    with pytest.raises(NoSuchKey):
        await tier.get_object(BUCKET, "a")
    with pytest.raises(NoSuchBucket):
        [i async for i in tier.iter_objects("nobucket")]
    await tier.wait_flushed()
    assert [i.key async for i in backend.iter_objects(BUCKET)] == ["b", "bb", "c", "d/1", "d/2"]
    assert [i.key async for i in tier.iter_objects(BUCKET)] == ["b", "bb", "c", "d/1", "d/2"]
    assert tier.store.get(BUCKET, "a") is None  # the flushed tombstone is gone


async def test_read_through_keeps_clean_copy_and_lru_evicts(env: Env) -> None:
    backend = env.backend()
    await backend.create_bucket(BUCKET)
    objs = {f"o{i}": payload(30_000, seed=i) for i in range(3)}
    for key, data in objs.items():
        await backend.put_object(BUCKET, key, body(data), meta=META)
    tier = await env.tier(cache_settings(env.base, capacity=70_000), inner=backend)
    assert await read_all(await tier.get_object(BUCKET, "o0")) == objs["o0"]
    assert tier.status()["misses"] == 1
    entry = tier.store.get(BUCKET, "o0")
    assert entry is not None and entry.state is EntryState.CLEAN
    assert await read_all(await tier.get_object(BUCKET, "o0")) == objs["o0"]
    assert tier.status()["hits"] == 1
    await read_all(await tier.get_object(BUCKET, "o1"))
    await read_all(await tier.get_object(BUCKET, "o0"))  # o0 is now the most recent
    await read_all(await tier.get_object(BUCKET, "o2"))  # evicts o1 (LRU), not o0
    assert tier.store.get(BUCKET, "o1") is None
    assert tier.store.get(BUCKET, "o0") is not None and tier.store.get(BUCKET, "o2")
    status = tier.status()
    assert status["evictions"] == 1
    assert status["cache_used_bytes"] <= status["cache_capacity_bytes"]
    # Range reads of uncached objects go to the backend and are not cached.
    part = await read_all(await tier.get_object(BUCKET, "o1",
                                                byte_range=RangeRequest(first=5, last=9)))
    assert part == objs["o1"][5:10] and tier.store.get(BUCKET, "o1") is None


async def test_abandoned_read_through_releases_space(env: Env) -> None:
    backend = env.backend()
    await backend.create_bucket(BUCKET)
    data = payload(40_000)
    await backend.put_object(BUCKET, "big", body(data), meta=META)
    tier = await env.tier(inner=backend)
    stream = await tier.get_object(BUCKET, "big")
    first = await anext(aiter(stream))
    assert first == data[:len(first)]
    assert tier.status()["cache_used_bytes"] > 0  # reserved for the copy
    await stream.aclose()
    assert tier.status()["cache_used_bytes"] == 0
    assert tier.store.get(BUCKET, "big") is None
    assert env.cache_files() == set()
    # Opened but never read: closing still releases everything.
    stream = await tier.get_object(BUCKET, "big")
    await stream.aclose()
    assert tier.status()["cache_used_bytes"] == 0


async def test_read_through_does_not_overwrite_a_newer_write(env: Env) -> None:
    backend = env.backend()
    await backend.create_bucket(BUCKET)
    await backend.put_object(BUCKET, "k", body(b"old" * 1000), meta=META)
    tier = await env.tier(inner=backend)
    stream = await tier.get_object(BUCKET, "k")
    await tier.put_object(BUCKET, "k", body(b"new"), meta=META)
    assert await read_all(stream) == b"old" * 1000  # the read began before the write
    assert await read_all(await tier.get_object(BUCKET, "k")) == b"new"
    await tier.wait_flushed()
    assert await read_all(await backend.get_object(BUCKET, "k")) == b"new"


async def test_replace_metadata_and_copy(env: Env) -> None:
    tier = await env.tier()
    data = payload(10_000)
    await tier.put_object(BUCKET, "src", body(data), meta=META)
    new_meta = ObjectMeta(content_type="text/plain", user={"x": "y"})
    info = await tier.replace_metadata(BUCKET, "src", new_meta)
    assert info.meta.user == {"x": "y"} and info.etag == md5(data)
    with pytest.raises(PreconditionFailed):
        await tier.copy_object(BUCKET, "src", BUCKET, "dst", meta=META, src_etag="0" * 32)
    copied = await tier.copy_object(BUCKET, "src", BUCKET, "dst", meta=META,
                                    src_etag=md5(data))
    assert copied.etag == md5(data)
    assert await read_all(await tier.get_object(BUCKET, "dst")) == data
    await tier.wait_flushed()
    backend = env.backend()
    assert (await backend.head_object(BUCKET, "src")).meta.user == {"x": "y"}
    assert await read_all(await backend.get_object(BUCKET, "dst")) == data
    # Clean entry: replace goes to the backend and the cached record follows.
    info = await tier.replace_metadata(BUCKET, "src", META)
    assert (await backend.head_object(BUCKET, "src")).meta.user == {"k": "v"}
    assert (await tier.head_object(BUCKET, "src")).meta.user == {"k": "v"}
    with pytest.raises(NoSuchKey):
        await tier.replace_metadata(BUCKET, "missing", META)


async def test_delete_bucket(env: Env) -> None:
    tier = await env.tier()
    await tier.create_bucket("other")
    await tier.put_object("other", "k", body(b"x"), meta=META)
    with pytest.raises(BucketNotEmpty):
        await tier.delete_bucket("other")
    await tier.delete_object("other", "k")
    await tier.delete_bucket("other")  # the pending delete is flushed first
    with pytest.raises(NoSuchBucket):
        await tier.head_bucket("other")


async def test_two_volumes_spread_and_count(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, capacity=40_000, volumes=2))
    for i in range(4):
        await tier.put_object(BUCKET, f"k{i}", body(payload(15_000, seed=i)), meta=META)
    used = {v.path.name: v.used for v in tier.store.space.volumes.values()}
    assert all(u > 0 for u in used.values()) and sum(used.values()) == 4 * (15_000 + 16)
    for i in range(4):
        assert await read_all(await tier.get_object(BUCKET, f"k{i}")) == payload(15_000, seed=i)
    await until(lambda: tier.status()["dirty_bytes"] == 0, "flush")


async def test_delete_bucket_waits_a_bounded_time_for_pending_deletions(env: Env) -> None:
    """A deletion the backend does not take yet (its bucket directory is broken: a real
    fault) keeps DeleteBucket waiting only so long: 503 SlowDown, nothing deleted, and
    the same request succeeds once the deletion is flushed."""
    # The broken bucket answers NoSuchBucket, which is retried (not quarantined) here.
    tier = await env.tier(cache_settings(env.base, quarantine_attempts=1000))
    await tier.create_bucket("other")
    await tier.put_object("other", "k", body(b"x"), meta=META)
    await tier.wait_flushed("other")
    env.break_bucket("other")  # before the deletion, which could flush at once
    await tier.delete_object("other", "k")  # a pending deletion in the cache
    tier.bucket_drain_timeout_s = 0.5
    with pytest.raises(SlowDown):
        await tier.delete_bucket("other")
    env.repair_bucket("other")
    assert await tier.head_bucket("other")  # not deleted
    tier.bucket_drain_timeout_s = 60.0
    await tier.delete_bucket("other")
    with pytest.raises(NoSuchBucket):
        await tier.head_bucket("other")
