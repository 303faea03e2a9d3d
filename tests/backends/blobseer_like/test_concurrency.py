"""Many writers of one key without a lock on the data path; internal (versioning) keys."""

from __future__ import annotations

import asyncio

import pytest

from backends.blobseer_like import BlobseerBackend
from backends.core.base import ObjectMeta
from backends.core.errors import InvalidKey, KeyTooLong, NoSuchKey, PreconditionFailed
from tests.backends.blobseer_like.conftest import CHUNK
from tests.backends.blobseer_like.support import get, put, stored_bytes
from tests.backends.conformance import blob, body_of, collect, md5_hex, read_all


async def test_many_writers_of_one_key(store: BlobseerBackend) -> None:
    versions = [blob(CHUNK * (1 + i % 5) + i, seed=i) for i in range(32)]
    acknowledged: list[str] = []
    reads: list[bytes] = []
    done = asyncio.Event()

    async def writer(data: bytes) -> None:
        info = await store.put_object("bkt", "hot", body_of(data, 25_000, pause=True),
                                      meta=ObjectMeta())
        acknowledged.append(info.etag)

    async def reader() -> None:
        while not done.is_set():
            try:
                stream = await store.get_object("bkt", "hot")
            except NoSuchKey:
                await asyncio.sleep(0)
                continue
            data = await read_all(stream)
            assert md5_hex(data) == stream.info.etag
            reads.append(data)

    async def writers() -> None:
        await asyncio.gather(*(writer(v) for v in versions))
        done.set()

    await asyncio.gather(writers(), reader(), reader())
    assert (await store.head_object("bkt", "hot")).etag == acknowledged[-1]
    assert md5_hex(await get(store, "hot")) == acknowledged[-1]
    assert all(r in versions for r in reads)
    await store.collect_garbage()
    assert stored_bytes(store) == len(next(v for v in versions
                                           if md5_hex(v) == acknowledged[-1]))


async def test_one_conditional_create_wins(store: BlobseerBackend) -> None:
    async def create(i: int) -> bool:
        try:
            await store.put_object("bkt", "once", body_of(blob(2 * CHUNK, seed=i), pause=True),
                                   meta=ObjectMeta(), if_none_match="*")
            return True
        except PreconditionFailed:
            return False

    outcomes = await asyncio.gather(*(create(i) for i in range(10)))
    assert outcomes.count(True) == 1
    await store.collect_garbage()
    assert stored_bytes(store) == 2 * CHUNK


INTERNAL_KEYS = [
    "\x7fv/plain\t\t00017000000000000001-0a1b",
    "\x7fm/with\nnewline\tand tab\t\t00017000000000000002",
    "\x7fv/" + "%2F".join(["segment"] * 100) + "\t\t" + "9" * 20 + "-" + "f" * 8 + "é" * 300,
]


async def test_internal_keys(store: BlobseerBackend) -> None:
    assert len(INTERNAL_KEYS[2].encode()) > 1024
    for key in INTERNAL_KEYS:
        await put(store, key, key.encode())
    await put(store, "visible", b"v")
    for key in INTERNAL_KEYS:
        assert await get(store, key) == key.encode()
        assert (await store.head_object("bkt", key)).key == key
    listed = [i.key for i in await collect(store.iter_objects("bkt"))]
    assert listed == sorted([*INTERNAL_KEYS, "visible"], key=lambda k: k.encode())
    assert [i.key for i in await collect(store.iter_objects("bkt", prefix="\x7fm/"))] == [
        INTERNAL_KEYS[1]]
    # Archiving the current version before an overwrite costs no data (the versioning way).
    data = blob(6 * CHUNK)
    await put(store, "doc", data)
    before = stored_bytes(store)
    await store.copy_object("bkt", "doc", "bkt", INTERNAL_KEYS[0], meta=ObjectMeta())
    assert stored_bytes(store) == before  # no chunk written
    await store.collect_garbage()  # the archived key's previous contents go
    assert stored_bytes(store) == before - len(INTERNAL_KEYS[0].encode())
    assert await get(store, INTERNAL_KEYS[0]) == data
    for key in INTERNAL_KEYS:
        await store.delete_object("bkt", key)
    assert [i.key for i in await collect(store.iter_objects("bkt"))] == ["doc", "visible"]


async def test_key_limits(store: BlobseerBackend) -> None:
    with pytest.raises(KeyTooLong):
        await put(store, "k" * 1025, b"")
    with pytest.raises(KeyTooLong):
        await put(store, "\x7f" + "k" * 4096, b"")
    with pytest.raises(InvalidKey):
        await put(store, "nul\0inside", b"")
    with pytest.raises(InvalidKey):
        await put(store, "", b"")
    await put(store, "k" * 1024, b"longest plain key")
    assert await get(store, "k" * 1024) == b"longest plain key"


async def test_copy_racing_a_delete_of_its_source(store: BlobseerBackend) -> None:
    for round_ in range(10):
        data = blob(3 * CHUNK, seed=round_)
        await put(store, "src", data)

        async def copy() -> bytes | None:
            try:
                await store.copy_object("bkt", "src", "bkt", "dst", meta=ObjectMeta())
            except NoSuchKey:
                return None
            return await get(store, "dst")

        async def delete_and_collect() -> None:
            await store.delete_object("bkt", "src")
            await store.collect_garbage()

        copied, _ = await asyncio.gather(copy(), delete_and_collect())
        assert copied is None or copied == data
        await store.delete_object("bkt", "dst")
