"""Multipart uploads larger than the cache: parts that find no room go to a backend upload
that belongs to the cached upload; completion mixes cached and backend parts; restarts and
SIGKILL; UploadPartCopy through the tier. A real CacheTier over a real PosixBackend."""

from __future__ import annotations

from typing import Any

import pytest

from backends.core.base import (
    CompletedPart,
    ObjectMeta,
    PartInfo,
    RangeRequest,
    Relay,
    UploadInfo,
    bare,
)
from backends.core.errors import (
    EntityTooSmall,
    InvalidPart,
    InvalidPartOrder,
    InvalidRange,
    NoSuchKey,
    NoSuchUpload,
    PreconditionFailed,
)
from backends.files import device_of
from backends.multipart import multipart_etag
from backends.throttled import ThrottleSettings
from gateway.cache.tier import CacheTier
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
)
from tests.gateway.cache.test_crash import check_space, run_child

KiB = 1024
PART = 80 * KiB  # above the inline limit: a cached part is a data file
SLOTS = 3  # cached parts that fit


async def cached_tier(env: Env, slots: int = SLOTS, **kwargs: Any) -> CacheTier:
    """A tier whose cache holds ``slots`` parts of PART bytes."""
    return await env.tier(cache_settings(env.base, capacity=slots * charge(PART)),
                          **kwargs)


async def backend_uploads(env: Env) -> list[UploadInfo]:
    backend = env.backend()
    try:
        return [u async for u in backend.iter_multipart_uploads(BUCKET)]  # type: ignore[attr-defined]
    finally:
        await backend.aclose()


async def backend_bytes(env: Env, key: str) -> tuple[str, bytes]:
    backend = env.backend()
    try:
        return ((await backend.head_object(BUCKET, key)).etag,
                await read_all(await backend.get_object(BUCKET, key)))
    finally:
        await backend.aclose()


async def upload(tier: CacheTier, key: str, datas: list[bytes], first: int = 1
                 ) -> tuple[str, list[PartInfo]]:
    up = await tier.create_multipart_upload(BUCKET, key, meta=META)
    infos = [await tier.upload_part(BUCKET, key, up.upload_id, first + i, body(d, 16 * KiB))
             for i, d in enumerate(datas)]
    return up.upload_id, infos


def done(infos: list[PartInfo]) -> list[CompletedPart]:
    return [CompletedPart(p.part_number, p.etag) for p in infos]


async def where(tier: CacheTier, key: str, upload_id: str) -> tuple[set[int], set[int]]:
    """(cached part numbers, part numbers held by the backend upload)."""
    cached = set(tier.store.parts_of(upload_id))
    listed = {p.part_number for p in await tier.list_parts(BUCKET, key, upload_id)}
    return cached, listed - cached


async def test_parts_beyond_the_cache_go_to_a_backend_upload_and_complete_there(
        env: Env) -> None:
    tier = await cached_tier(env)
    datas = [payload(PART, seed=i) for i in range(8)]
    upload_id, infos = await upload(tier, "big", datas)
    cached, remote = await where(tier, "big", upload_id)
    assert cached and remote and cached | remote == set(range(1, 9))
    assert max(cached) < min(remote)  # the cache filled first
    assert [(p.part_number, p.etag, p.size) for p in
            await tier.list_parts(BUCKET, "big", upload_id)] == \
        [(n + 1, md5(d), PART) for n, d in enumerate(datas)]
    # One cached upload is listed; its backend upload is not (but exists on the backend).
    assert [u.upload_id async for u in tier.iter_multipart_uploads(BUCKET)] == [upload_id]
    (hidden,) = await backend_uploads(env)
    assert hidden.upload_id != upload_id and hidden.key == "big"

    info = await tier.complete_multipart_upload(BUCKET, "big", upload_id, done(infos))
    assert info.etag == multipart_etag(infos) and info.size == 8 * PART
    assert await backend_bytes(env, "big") == (info.etag, b"".join(datas))  # on the backend
    assert [u async for u in tier.iter_multipart_uploads(BUCKET)] == []
    assert await backend_uploads(env) == []
    assert env.cache_files() == set() and tier.status()["cache_used_bytes"] == 0
    assert await read_all(await tier.get_object(BUCKET, "big")) == b"".join(datas)
    with pytest.raises(NoSuchUpload):
        await tier.list_parts(BUCKET, "big", upload_id)


async def test_a_cache_full_of_dirty_objects_sends_parts_to_the_backend(env: Env) -> None:
    """On the backend's disk, parts that find the cache full go to the backend at once."""
    slow = env.backend(ThrottleSettings(bandwidth_bytes_per_s=256 * KiB))
    tier = await cached_tier(env, slots=4, inner=slow,
                             backend_devices=frozenset({device_of(env.backend_root)}))
    for i in range(3):  # unflushed objects (the throttled backend is behind)
        await tier.put_object(BUCKET, f"dirty{i}", body(payload(PART, seed=90 + i)),
                              meta=META)
    datas = [payload(PART, seed=95 + i) for i in range(4)]
    upload_id, infos = await upload(tier, "m", datas)
    cached, remote = await where(tier, "m", upload_id)
    assert remote and cached | remote == {1, 2, 3, 4}
    assert [p.etag for p in await tier.list_parts(BUCKET, "m", upload_id)] == \
        [md5(d) for d in datas]
    info = await tier.complete_multipart_upload(BUCKET, "m", upload_id, done(infos))
    assert info.etag == multipart_etag(infos)
    assert [u async for u in tier.iter_multipart_uploads(BUCKET)] == []
    assert await read_all(await tier.get_object(BUCKET, "m")) == b"".join(datas)
    await tier.wait_flushed()
    assert await backend_bytes(env, "m") == (info.etag, b"".join(datas))
    assert await backend_uploads(env) == []


@pytest.mark.parametrize("shared", [True, False], ids=["backends-disk", "other-disk"])
async def test_a_part_into_a_full_static_cache_goes_to_the_backend_at_once(
        env: Env, shared: bool) -> None:
    """A part of an upload holding cached parts finds the cache full of unflushed
    objects, in front of a slow backend: it goes to the backend at once, on the backend's
    disk or not (a flush would make room no faster than the backend takes the part, and
    the bytes would travel twice), and completion sends the cached part into that backend
    upload. (An elastic cache makes it wait for a new volume:
    test_elastic_n1_server.py.)"""
    slow = env.backend(ThrottleSettings(bandwidth_bytes_per_s=256 * KiB))
    devices = frozenset({device_of(env.backend_root)}) if shared else frozenset()
    tier = await env.tier(cache_settings(env.base, capacity=4 * charge(PART),
                                         backpressure_timeout_s=30),
                          inner=slow, backend_devices=devices)
    assert tier.shares_disk is shared and not tier.waits_for_room(PART)
    up = await tier.create_multipart_upload(BUCKET, "m", meta=META)
    datas = [payload(PART, seed=60 + i) for i in range(2)]
    first = await tier.upload_part(BUCKET, "m", up.upload_id, 1, body(datas[0], 16 * KiB))
    for i in range(3):  # the rest of the cache: objects the slow backend has not taken
        await tier.put_object(BUCKET, f"dirty{i}", body(payload(PART, seed=90 + i)),
                              meta=META)
    second = await tier.upload_part(BUCKET, "m", up.upload_id, 2, body(datas[1], 16 * KiB))
    assert await where(tier, "m", up.upload_id) == ({1}, {2})
    assert tier.status()["diverted_bytes_total"] == PART
    info = await tier.complete_multipart_upload(BUCKET, "m", up.upload_id,
                                                done([first, second]))
    assert info.etag == multipart_etag([first, second])
    # completed on the backend, the cached part sent once
    assert await backend_bytes(env, "m") == (info.etag, b"".join(datas))
    assert await read_all(await tier.get_object(BUCKET, "m")) == b"".join(datas)
    await tier.wait_flushed()
    assert await backend_bytes(env, "m") == (info.etag, b"".join(datas))
    assert await backend_uploads(env) == []


async def test_the_rates_do_not_split_an_upload_that_holds_cached_parts(env: Env) -> None:
    """Once an upload holds parts in the cache, its later parts stay there even when the
    admission rates come to prefer the backend (parts that waited for room make the cache
    look slow): one sent past would make the upload complete on the backend, every cached
    part sent there again. A new upload still follows the rates."""
    tier = await env.tier(cache_settings(env.base, capacity=8 * charge(PART),
                                         admission="auto"))
    up = await tier.create_multipart_upload(BUCKET, "ckpt", meta=META)
    datas = [payload(PART, seed=70 + i) for i in range(2)]

    def sized(data: bytes) -> Relay:  # a declared length: its size class is known
        return bare(aiter(body(data)), declared_length=len(data))
    first = await tier.upload_part(BUCKET, "ckpt", up.upload_id, 1, sized(datas[0]))
    tier.admission.observe_backend(PART, 1e-6, tier.store.now())  # the backend: "faster"
    other = await tier.create_multipart_upload(BUCKET, "other", meta=META)
    await tier.upload_part(BUCKET, "other", other.upload_id, 1, sized(datas[0]))
    assert await where(tier, "other", other.upload_id) == (set(), {1})  # the rates say so
    second = await tier.upload_part(BUCKET, "ckpt", up.upload_id, 2, sized(datas[1]))
    assert await where(tier, "ckpt", up.upload_id) == ({1, 2}, set())
    info = await tier.complete_multipart_upload(BUCKET, "ckpt", up.upload_id,
                                                done([first, second]))
    entry = tier.store.get(BUCKET, "ckpt")
    assert entry is not None and entry.dirty  # completed in the cache
    await tier.wait_flushed()
    assert await backend_bytes(env, "ckpt") == (info.etag, b"".join(datas))


async def test_cached_parts_only_complete_in_the_cache_and_abort_the_backend_upload(
        env: Env) -> None:
    tier = await cached_tier(env)
    datas = [payload(PART, seed=10 + i) for i in range(5)]
    upload_id, infos = await upload(tier, "k", datas)
    cached, remote = await where(tier, "k", upload_id)
    assert cached == {1, 2, 3} and remote == {4, 5}
    (hidden,) = await backend_uploads(env)
    info = await tier.complete_multipart_upload(BUCKET, "k", upload_id, done(infos[:3]))
    assert info.etag == multipart_etag(infos[:3])
    assert tier.store.get(BUCKET, "k") is not None  # a cached (dirty) object
    assert hidden.upload_id not in {u.upload_id for u in await backend_uploads(env)}
    assert await read_all(await tier.get_object(BUCKET, "k")) == b"".join(datas[:3])
    await tier.wait_flushed()
    assert await backend_uploads(env) == []  # (nor the flusher's)
    assert await backend_bytes(env, "k") == (info.etag, b"".join(datas[:3]))


async def test_a_replaced_part_moves_between_cache_and_backend(env: Env) -> None:
    tier = await cached_tier(env, slots=2)
    old = [payload(PART, seed=20 + i) for i in range(3)]
    upload_id, infos = await upload(tier, "r", old)
    assert await where(tier, "r", upload_id) == ({1, 2}, {3})
    new1 = payload(PART, seed=30)
    infos[0] = await tier.upload_part(BUCKET, "r", upload_id, 1, body(new1))  # cache full
    assert await where(tier, "r", upload_id) == ({2}, {1, 3})
    assert len(env.cache_files()) == 1  # the replaced cached file is gone
    new3 = payload(PART - 1, seed=31)
    infos[2] = await tier.upload_part(BUCKET, "r", upload_id, 3, body(new3))  # room again
    assert await where(tier, "r", upload_id) == ({2, 3}, {1})
    listed = await tier.list_parts(BUCKET, "r", upload_id)
    assert [(p.part_number, p.etag) for p in listed] == [(p.part_number, p.etag) for p in infos]
    with pytest.raises(InvalidPart):  # the replaced part's ETag is no longer valid
        await tier.complete_multipart_upload(BUCKET, "r", upload_id,
                                             [CompletedPart(1, md5(old[0]))])
    info = await tier.complete_multipart_upload(BUCKET, "r", upload_id, done(infos))
    assert await backend_bytes(env, "r") == (info.etag, new1 + old[1] + new3)
    assert env.cache_files() == set()


async def test_abort_with_backend_parts_leaves_no_backend_upload(env: Env) -> None:
    tier = await cached_tier(env)
    upload_id, _ = await upload(tier, "a", [payload(PART, seed=i) for i in range(6)])
    assert len(await backend_uploads(env)) == 1
    await tier.abort_multipart_upload(BUCKET, "a", upload_id)
    assert await backend_uploads(env) == []
    assert not any((env.backend_root / ".squall" / "uploads" / BUCKET).iterdir())
    assert env.cache_files() == set() and tier.status()["cache_used_bytes"] == 0
    assert [u async for u in tier.iter_multipart_uploads(BUCKET)] == []
    for call in (tier.list_parts(BUCKET, "a", upload_id),
                 tier.abort_multipart_upload(BUCKET, "a", upload_id),
                 tier.upload_part(BUCKET, "a", upload_id, 1, body(b"x"))):
        with pytest.raises(NoSuchUpload):
            await call


async def test_bad_completions_with_backend_parts_keep_their_s3_errors(env: Env) -> None:
    tier = await cached_tier(env, slots=2)
    datas = [payload(PART, seed=40), payload(PART, seed=41), b"small", payload(PART, 42)]
    upload_id, infos = await upload(tier, "e", datas)
    assert await where(tier, "e", upload_id) == ({1, 2}, {3, 4})
    with pytest.raises(EntityTooSmall):  # a small backend part that is not the last
        await tier.complete_multipart_upload(BUCKET, "e", upload_id, done(infos))
    with pytest.raises(InvalidPartOrder):
        await tier.complete_multipart_upload(BUCKET, "e", upload_id,
                                             done([infos[3], infos[0]]))
    with pytest.raises(InvalidPart):
        await tier.complete_multipart_upload(BUCKET, "e", upload_id,
                                             [CompletedPart(1, infos[0].etag),
                                              CompletedPart(4, "0" * 32)])
    with pytest.raises(InvalidPart):
        await tier.complete_multipart_upload(BUCKET, "e", upload_id, [])
    for call in (tier.complete_multipart_upload(BUCKET, "other", upload_id, done(infos)),
                 tier.list_parts(BUCKET, "other", upload_id),
                 tier.complete_multipart_upload(BUCKET, "e", "0" * 32, done(infos))):
        with pytest.raises(NoSuchUpload):
            await call
    with pytest.raises(NoSuchKey):  # If-Match on a key that does not exist
        await tier.complete_multipart_upload(BUCKET, "e", upload_id, done(infos[:2]),
                                             if_match="0" * 32)
    backend = env.backend()
    current = await backend.put_object(BUCKET, "e", body(b"current"), meta=META)
    await backend.aclose()
    for if_match, if_none_match in (("0" * 32, None), (None, "*")):
        with pytest.raises(PreconditionFailed):
            await tier.complete_multipart_upload(BUCKET, "e", upload_id, done(infos[:2]),
                                                 if_match=if_match,
                                                 if_none_match=if_none_match)
    with pytest.raises(InvalidPart):
        await tier.upload_part(BUCKET, "e", upload_id, 10_001, body(b"x"))
    # Nothing was lost on the way: the upload completes with its parts.
    chosen = [infos[0], infos[1], infos[3]]
    info = await tier.complete_multipart_upload(BUCKET, "e", upload_id, done(chosen),
                                                if_match=current.etag)
    assert await backend_bytes(env, "e") == (
        info.etag, datas[0] + datas[1] + datas[3])


async def test_an_older_cached_version_never_overwrites_the_completed_upload(
        env: Env) -> None:
    slow = env.backend(ThrottleSettings(bandwidth_bytes_per_s=512 * KiB))
    tier = await env.tier(cache_settings(env.base, capacity=3 * charge(PART) + 70 * KiB),
                          inner=slow)
    datas = [payload(PART, seed=50 + i) for i in range(5)]
    upload_id, infos = await upload(tier, "v", datas)
    assert await where(tier, "v", upload_id) == ({1, 2, 3}, {4, 5})
    # An older version written meanwhile, still being flushed (slowly) at completion.
    await tier.put_object(BUCKET, "v", body(payload(60 * KiB, seed=59)), meta=META)
    info = await tier.complete_multipart_upload(BUCKET, "v", upload_id, done(infos))
    await tier.wait_flushed()  # the old version can no longer overwrite the completed one
    assert await backend_bytes(env, "v") == (info.etag, b"".join(datas))
    assert await read_all(await tier.get_object(BUCKET, "v")) == b"".join(datas)


async def test_uploads_with_backend_parts_survive_a_restart(env: Env) -> None:
    tier = await cached_tier(env)
    datas = [payload(PART, seed=60 + i) for i in range(5)]
    upload_id, infos = await upload(tier, "s", datas)
    before = await tier.list_parts(BUCKET, "s", upload_id)
    await env.close(tier)
    tier = await cached_tier(env, create_bucket=False)
    assert await tier.list_parts(BUCKET, "s", upload_id) == before
    assert [u.upload_id async for u in tier.iter_multipart_uploads(BUCKET)] == [upload_id]
    infos.append(await tier.upload_part(BUCKET, "s", upload_id, 6, body(b"tail")))
    info = await tier.complete_multipart_upload(BUCKET, "s", upload_id, done(infos))
    assert await backend_bytes(env, "s") == (info.etag, b"".join(datas) + b"tail")
    assert await backend_uploads(env) == []


async def test_sigkill_after_backend_parts_then_complete(env: Env) -> None:
    size = 50_000
    cfg = {"mode": "multipart", "count": 40, "size": size,
           "settings": {"capacity": 2 * charge(size) + 100}}
    lines = await run_child(env, cfg, lambda ls: sum(1 for x in ls if x[0] == "PART") >= 5)
    upload_id = next(x[1] for x in lines if x[0] == "UPLOAD")
    parts = [(int(x[1]), x[2]) for x in lines if x[0] == "PART"]
    tier = await env.tier(cache_settings(env.base, capacity=2 * charge(size) + 100),
                          create_bucket=False)
    await check_space(env, tier)
    cached, remote = await where(tier, "mp", upload_id)
    assert {1, 2} <= cached and {3, 4, 5} <= remote
    stored = await tier.list_parts(BUCKET, "mp", upload_id)
    assert [(p.part_number, p.etag) for p in stored][:len(parts)] == parts
    info = await tier.complete_multipart_upload(
        BUCKET, "mp", upload_id, [CompletedPart(n, e) for n, e in parts])
    expected = b"".join(payload(size, 1000 + n) for n, _ in parts)
    assert await backend_bytes(env, "mp") == (info.etag, expected)
    assert await backend_uploads(env) == []  # also any part upload cut by the kill
    await check_space(env, tier)


# -- UploadPartCopy through the tier ----------------------------------------------------

async def test_part_copy_of_a_dirty_source_is_made_in_the_cache(env: Env) -> None:
    tier = await env.tier()
    env.break_bucket()  # a real backend fault: the source cannot be flushed, stays dirty
    source = payload(100 * KiB, seed=70)
    src = await tier.put_object(BUCKET, "src", body(source), meta=META)
    up = await tier.create_multipart_upload(BUCKET, "dst", meta=ObjectMeta())
    whole = await tier.upload_part_copy(BUCKET, "src", BUCKET, "dst", up.upload_id, 1,
                                        src_etag=src.etag)
    ranged = await tier.upload_part_copy(BUCKET, "src", BUCKET, "dst", up.upload_id, 2,
                                         byte_range=RangeRequest(first=100, last=4195))
    assert (whole.etag, ranged.etag) == (src.etag, md5(source[100:4196]))
    assert set(tier.store.parts_of(up.upload_id)) == {1, 2}  # cached parts
    with pytest.raises(PreconditionFailed):
        await tier.upload_part_copy(BUCKET, "src", BUCKET, "dst", up.upload_id, 3,
                                    src_etag=md5(b"another version"))
    with pytest.raises(InvalidRange):
        await tier.upload_part_copy(BUCKET, "src", BUCKET, "dst", up.upload_id, 3,
                                    byte_range=RangeRequest(first=len(source)))
    assert tier.store.get(BUCKET, "src").dirty  # type: ignore[union-attr]
    info = await tier.complete_multipart_upload(BUCKET, "dst", up.upload_id,
                                                done([whole, ranged]))
    assert await read_all(await tier.get_object(BUCKET, "dst")) == source + source[100:4196]
    assert info.etag == multipart_etag([whole, ranged])
    env.repair_bucket()
    await tier.wait_flushed()
    assert await backend_bytes(env, "dst") == (info.etag, source + source[100:4196])


async def test_part_copy_of_a_clean_source_is_made_by_the_backend(env: Env) -> None:
    tier = await cached_tier(env)
    source = payload(5 * PART, seed=80)  # larger than the cache: the part goes past it
    backend = env.backend()
    src = await backend.put_object(BUCKET, "src", body(source), meta=ObjectMeta())
    await backend.aclose()
    up = await tier.create_multipart_upload(BUCKET, "dst", meta=ObjectMeta())
    misses, used = tier.status()["misses"], tier.status()["cache_used_bytes"]
    whole = await tier.upload_part_copy(BUCKET, "src", BUCKET, "dst", up.upload_id, 1,
                                        src_etag=src.etag)
    big_range = RangeRequest(first=PART, last=5 * PART - 10)
    ranged = await tier.upload_part_copy(BUCKET, "src", BUCKET, "dst", up.upload_id, 2,
                                         byte_range=big_range)
    # Neither read through the cache: the backend copied both into its upload.
    assert tier.status()["misses"] == misses and tier.status()["cache_used_bytes"] == used
    assert await where(tier, "dst", up.upload_id) == (set(), {1, 2})
    assert (whole.etag, ranged.etag) == (src.etag, md5(source[PART:5 * PART - 9]))
    small = await tier.upload_part_copy(BUCKET, "src", BUCKET, "dst", up.upload_id, 3,
                                        byte_range=RangeRequest(suffix=10))
    assert await where(tier, "dst", up.upload_id) == ({3}, {1, 2})  # small: copied into the cache
    with pytest.raises(PreconditionFailed):
        await tier.upload_part_copy(BUCKET, "src", BUCKET, "dst", up.upload_id, 4,
                                    src_etag=md5(b"another version"))
    info = await tier.complete_multipart_upload(BUCKET, "dst", up.upload_id,
                                                done([whole, ranged, small]))
    expected = source + source[PART:5 * PART - 9] + source[-10:]
    assert await backend_bytes(env, "dst") == (info.etag, expected)
