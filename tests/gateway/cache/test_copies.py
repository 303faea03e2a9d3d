"""CopyObject through the cache stays server-side when the backend holds the source."""

from __future__ import annotations

from backends.blobseer_like import BlobseerBackend
from tests.backends.blobseer_like.conftest import make_store
from tests.backends.blobseer_like.support import stored_bytes
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

SIZE = 1 << 20


async def _tier_over_blobseer(env: Env):  # type: ignore[no-untyped-def]
    blobs: BlobseerBackend = make_store(env.base / "blobs")
    tier = await env.tier(cache_settings(env.base, capacity=8 << 20), inner=blobs)
    return tier, blobs


async def test_clean_source_is_copied_by_the_backend(env: Env) -> None:
    tier, blobs = await _tier_over_blobseer(env)
    data = payload(SIZE, 1)
    await tier.put_object(BUCKET, "src", body(data, 65536), meta=META)
    await tier.wait_flushed()
    before = stored_bytes(blobs)
    info = await tier.copy_object(BUCKET, "src", BUCKET, "dst", meta=META, src_etag=md5(data))
    assert info.etag == md5(data)
    assert stored_bytes(blobs) - before < SIZE // 4  # chunks shared, only metadata
    assert tier.store.get(BUCKET, "dst") is None  # nothing went through the cache
    assert await read_all(await tier.get_object(BUCKET, "dst")) == data


async def test_dirty_source_is_copied_in_the_cache(env: Env) -> None:
    tier, blobs = await _tier_over_blobseer(env)
    data = payload(SIZE, 2)
    await tier.put_object(BUCKET, "src", body(data, 65536), meta=META)
    assert tier.store.get(BUCKET, "src").dirty  # type: ignore[union-attr]
    await tier.copy_object(BUCKET, "src", BUCKET, "dst", meta=META)
    copied = tier.store.get(BUCKET, "dst")
    assert copied is not None and copied.dirty  # the newest bytes, from the cache
    assert await read_all(await tier.get_object(BUCKET, "dst")) == data
    await tier.wait_flushed()
    assert await read_all(await blobs.get_object(BUCKET, "dst")) == data


async def test_copy_over_a_dirty_destination_keeps_order(env: Env) -> None:
    tier, blobs = await _tier_over_blobseer(env)
    src, old = payload(SIZE, 3), payload(1000, 4)
    await tier.put_object(BUCKET, "src", body(src, 65536), meta=META)
    await tier.wait_flushed()
    await tier.put_object(BUCKET, "dst", body(old), meta=META)  # dirty destination
    await tier.copy_object(BUCKET, "src", BUCKET, "dst", meta=META)
    assert await read_all(await tier.get_object(BUCKET, "dst")) == src
    await tier.wait_flushed()
    assert await read_all(await blobs.get_object(BUCKET, "dst")) == src
