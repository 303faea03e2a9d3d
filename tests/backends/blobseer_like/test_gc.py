"""Garbage collection: what no version refers to goes, while traffic continues; what an
operation in flight is about to use stays; leftovers of a crash go."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator

from backends.blobseer_like import BlobseerBackend
from backends.blobseer_like import format as fmt
from backends.core.base import CompletedPart, ObjectMeta, bare
from tests.backends.blobseer_like.conftest import CHUNK, MIN_PART, Factory
from tests.backends.blobseer_like.support import chunk_files, get, put, stored_bytes
from tests.backends.conformance import blob, body_of, failing_body, md5_hex, read_all


def record_files(store: BlobseerBackend) -> list[str]:
    return [n for p in store.store.pool.by_id.values() for n in p.record_names()]


async def test_deleted_and_overwritten_data_is_reclaimed(store: BlobseerBackend) -> None:
    await put(store, "a", blob(5 * CHUNK, seed=1))
    await put(store, "b", blob(3 * CHUNK, seed=2))
    new_a = blob(2 * CHUNK + 1, seed=3)
    await put(store, "a", new_a)
    await store.delete_object("bkt", "b")
    first = await store.collect_garbage()
    assert first.chunks == 8
    assert stored_bytes(store) == len(new_a)
    second = await store.collect_garbage()  # b's tombstone stood alone after the first pass
    assert second.records == 2 and second.chunks == 0
    index = store.store.index
    assert [e.key for e in index.records()] == ["a"]
    assert len(record_files(store)) == 2  # a's current record, on two providers
    assert await get(store, "a") == new_a
    assert (await store.collect_garbage()).records == 0


async def test_shared_chunks_live_while_one_version_uses_them(store: BlobseerBackend) -> None:
    data = blob(4 * CHUNK)
    await put(store, "src", data)
    await store.copy_object("bkt", "src", "bkt", "copy", meta=ObjectMeta())
    await store.delete_object("bkt", "src")
    await store.collect_garbage()
    assert stored_bytes(store) == len(data) and await get(store, "copy") == data
    await store.delete_object("bkt", "copy")
    assert (await store.collect_garbage()).chunks == 4
    assert chunk_files(store) == []


async def test_uploads_garbage(store: BlobseerBackend) -> None:
    upload = await store.create_multipart_upload("bkt", "mp", meta=ObjectMeta())
    uid = upload.upload_id
    await store.upload_part("bkt", "mp", uid, 1, body_of(blob(MIN_PART, seed=1)))
    part = await store.upload_part("bkt", "mp", uid, 1, body_of(blob(MIN_PART, seed=2)))
    last = await store.upload_part("bkt", "mp", uid, 2, body_of(b"end"))
    report = await store.collect_garbage()  # the replaced part 1
    assert report.chunks == MIN_PART // CHUNK and report.uploads == 2  # on two replicas
    await store.complete_multipart_upload("bkt", "mp", uid, [CompletedPart(1, part.etag),
                                                             CompletedPart(2, last.etag)])
    await store.collect_garbage()
    assert stored_bytes(store) == MIN_PART + 3
    other = await store.create_multipart_upload("bkt", "x", meta=ObjectMeta())
    await store.upload_part("bkt", "x", other.upload_id, 1, body_of(blob(CHUNK)))
    await store.abort_multipart_upload("bkt", "x", other.upload_id)
    await store.collect_garbage()
    assert stored_bytes(store) == MIN_PART + 3
    assert await get(store, "mp") == blob(MIN_PART, seed=2) + b"end"


async def test_crash_leftovers_are_removed(store: BlobseerBackend) -> None:
    data = blob(2 * CHUNK)
    await put(store, "k", data)
    provider = next(iter(store.store.pool.by_id.values()))
    # What a process killed mid-write leaves: chunks and a record no index entry names,
    # an upload directory whose upload was never indexed.
    provider.write_chunk(fmt.new_id(), b"orphan" * 100)
    provider.write_record(fmt.record_name(1), b"{}")
    provider.make_upload_dir(fmt.new_id())
    report = await store.collect_garbage()
    assert (report.chunks, report.records, report.uploads) == (1, 1, 1)
    assert stored_bytes(store) == len(data) and await get(store, "k") == data


async def test_failed_writes_leave_no_chunks(store: BlobseerBackend) -> None:
    for _ in range(3):
        with contextlib.suppress(Exception):  # the body's own failure
            await store.put_object("bkt", "k", failing_body(blob(5 * CHUNK), 3 * CHUNK + 1),
                                   meta=ObjectMeta())
    assert chunk_files(store) == []


async def _held(data: bytes, release: asyncio.Event, started: asyncio.Event
                ) -> AsyncIterator[bytes]:
    yield data[:len(data) // 2]
    started.set()
    await release.wait()
    yield data[len(data) // 2:]


async def test_in_flight_writes_and_open_streams_survive_a_pass(
        store: BlobseerBackend) -> None:
    data = blob(6 * CHUNK)
    release, started = asyncio.Event(), asyncio.Event()
    writing = asyncio.ensure_future(store.put_object("bkt", "new", bare(_held(data, release, started)),
                                                     meta=ObjectMeta()))
    old = blob(4 * CHUNK, seed=9)
    await put(store, "old", old)
    stream = await store.get_object("bkt", "old")
    await started.wait()
    for _ in range(400):  # until the first half of "new" is on the providers (bounded)
        if len(chunk_files(store)) >= 4 + 3:
            break
        await asyncio.sleep(0.01)
    await store.delete_object("bkt", "old")
    report = await store.collect_garbage()
    assert report.chunks == 0  # the open stream still uses old's chunks
    assert await read_all(stream) == old
    release.set()
    await writing
    assert await get(store, "new") == data
    assert (await store.collect_garbage()).chunks == 4
    assert stored_bytes(store) == len(data)


async def test_collection_runs_alongside_traffic(store: BlobseerBackend) -> None:
    rng = random.Random(3)
    written: dict[str, bytes] = {}
    done = asyncio.Event()

    async def writer(n: int) -> None:
        for i in range(12):
            key = f"k{rng.randrange(4)}"
            action = rng.random()
            if action < 0.6:
                data = blob(rng.randrange(1, 4 * CHUNK), seed=n * 100 + i)
                await store.put_object("bkt", key, body_of(data, 30_000, pause=True),
                                       meta=ObjectMeta())
                written[md5_hex(data)] = data
            elif action < 0.8:
                with contextlib.suppress(Exception):  # the source may not exist yet
                    await store.copy_object("bkt", key, "bkt", f"k{rng.randrange(4)}",
                                            meta=ObjectMeta())
            else:
                await store.delete_object("bkt", key)

    async def reader() -> None:
        while not done.is_set():
            for i in range(4):
                try:
                    stream = await store.get_object("bkt", f"k{i}")
                except Exception:  # noqa: BLE001,S112 - deleted or not yet written
                    continue
                data = await read_all(stream)
                assert md5_hex(data) == stream.info.etag and data == written[md5_hex(data)]
            await asyncio.sleep(0)

    async def collector() -> None:
        while not done.is_set():
            await store.collect_garbage()
            await asyncio.sleep(0.01)

    async def writers() -> None:
        await asyncio.gather(*(writer(n) for n in range(4)))
        done.set()

    await asyncio.gather(writers(), reader(), reader(), collector())
    await store.collect_garbage()
    await store.collect_garbage()
    live = set()
    for i in range(4):
        version = store.store.index.current("bkt", f"k{i}")
        if version is not None:
            live.update(c.id for c in version.chunks)
            assert await get(store, f"k{i}") == written[version.etag]
    assert {f.path.name for f in chunk_files(store)} == live


async def test_background_collection(make: Factory) -> None:
    store = make(gc_interval=0.05)
    await store.create_bucket("bkt")
    await put(store, "k", blob(3 * CHUNK))
    await store.delete_object("bkt", "k")
    for _ in range(400):  # a bounded wait for the background pass, not a timing check
        if not chunk_files(store):
            break
        await asyncio.sleep(0.05)
    assert chunk_files(store) == []
