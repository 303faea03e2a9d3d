"""Versions share unchanged chunks: copies, multipart completion, part copies, metadata
changes and ranged writes (appends) write no chunk they do not change."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from backends.blobseer_like import BlobseerBackend
from backends.core.base import (
    CompletedPart,
    ObjectMeta,
    PartCopyingBackend,
    RangedWriteBackend,
    RangeRequest,
)
from backends.core.errors import (
    ConditionalRequestConflict,
    InvalidRange,
    InvalidWriteOffset,
    NoSuchKey,
    NoSuchUpload,
    PreconditionFailed,
)
from tests.backends.blobseer_like.conftest import CHUNK, MIN_PART
from tests.backends.blobseer_like.support import (
    chunk_files,
    get,
    put,
    stored_bytes,
    version_chunks,
)
from tests.backends.conformance import blob, body_of, md5_hex


async def write_at(store: BlobseerBackend, key: str, offset: int, data: bytes,
                   **kwargs: object) -> object:
    return await store.write_at("bkt", key, offset, body_of(data, 20_000), **kwargs)  # type: ignore[arg-type]


def test_capabilities(store: BlobseerBackend) -> None:
    assert isinstance(store, RangedWriteBackend)
    assert isinstance(store, PartCopyingBackend)


async def test_copy_shares_every_chunk(store: BlobseerBackend) -> None:
    data = blob(10 * CHUNK + 5)
    await put(store, "src", data)
    before = stored_bytes(store)
    for i in range(5):
        info = await store.copy_object("bkt", "src", "bkt", f"copy/{i}",
                                       meta=ObjectMeta(user={"n": str(i)}))
        assert info.etag == md5_hex(data)
    assert stored_bytes(store) == before == len(data)
    assert version_chunks(store, "copy/4") == version_chunks(store, "src")
    assert await get(store, "copy/3") == data
    await store.replace_metadata("bkt", "copy/3", ObjectMeta(tags={"t": "1"}))
    assert stored_bytes(store) == len(data)


async def test_multipart_completion_moves_no_data(store: BlobseerBackend) -> None:
    upload = await store.create_multipart_upload("bkt", "mp", meta=ObjectMeta())
    parts, datas = [], []
    for number, size in enumerate([MIN_PART + 3 * CHUNK + 7, MIN_PART, 1000], start=1):
        data = blob(size, seed=number)
        datas.append(data)
        parts.append(await store.upload_part("bkt", "mp", upload.upload_id, number,
                                             body_of(data)))
    files = {f.path for f in chunk_files(store)}
    info = await store.complete_multipart_upload(
        "bkt", "mp", upload.upload_id, [CompletedPart(p.part_number, p.etag) for p in parts])
    assert {f.path for f in chunk_files(store)} == files
    assert info.size == sum(map(len, datas))
    assert await get(store, "mp") == b"".join(datas)
    assert await get(store, "mp", byte_range=RangeRequest(first=MIN_PART + 3 * CHUNK,
                                                          last=MIN_PART + 3 * CHUNK + 10)) \
        == b"".join(datas)[MIN_PART + 3 * CHUNK:MIN_PART + 3 * CHUNK + 11]


async def test_part_copy_shares_chunks(store: BlobseerBackend) -> None:
    data = blob(8 * CHUNK)
    src = await put(store, "src", data)
    upload = await store.create_multipart_upload("bkt", "dst", meta=ObjectMeta())
    before = stored_bytes(store)
    whole = await store.upload_part_copy("bkt", "src", "bkt", "dst", upload.upload_id, 1,
                                         src_etag=src.etag)
    assert whole.etag == src.etag and stored_bytes(store) == before
    # A range cutting two chunks rewrites just those two.
    first, last = CHUNK + 100, 5 * CHUNK + 99
    ranged = await store.upload_part_copy("bkt", "src", "bkt", "dst", upload.upload_id, 2,
                                          byte_range=RangeRequest(first=first, last=last))
    assert ranged.etag == md5_hex(data[first:last + 1])
    assert ranged.size == last - first + 1
    assert stored_bytes(store) - before == (CHUNK - 100) + 100
    info = await store.complete_multipart_upload(
        "bkt", "dst", upload.upload_id, [CompletedPart(1, whole.etag),
                                         CompletedPart(2, ranged.etag)])
    assert await get(store, "dst") == data + data[first:last + 1]
    assert info.size == len(data) + last - first + 1
    # One small range inside one chunk, and errors.
    upload = await store.create_multipart_upload("bkt", "dst", meta=ObjectMeta())
    uid = upload.upload_id
    inner = await store.upload_part_copy("bkt", "src", "bkt", "dst", uid, 1,
                                         byte_range=RangeRequest(first=10, last=19))
    assert inner.etag == md5_hex(data[10:20])
    with pytest.raises(PreconditionFailed):
        await store.upload_part_copy("bkt", "src", "bkt", "dst", uid, 1,
                                     src_etag=md5_hex(b"other"))
    with pytest.raises(NoSuchKey):
        await store.upload_part_copy("bkt", "absent", "bkt", "dst", uid, 1)
    with pytest.raises(InvalidRange):
        await store.upload_part_copy("bkt", "src", "bkt", "dst", uid, 1,
                                     byte_range=RangeRequest(first=len(data)))
    with pytest.raises(NoSuchUpload):
        await store.upload_part_copy("bkt", "src", "bkt", "other", uid, 1)


async def test_append_writes_only_new_chunks(store: BlobseerBackend) -> None:
    data = blob(10 * CHUNK)
    await put(store, "log", data, meta=ObjectMeta(user={"kind": "log"},
                                                   checksum=("CRC32", "AAAAAA==")))
    old = version_chunks(store, "log")
    more = blob(2 * CHUNK, seed=2)
    info = await write_at(store, "log", len(data), more)
    assert info.size == len(data) + len(more)  # type: ignore[attr-defined]
    assert info.etag.endswith("-12")  # type: ignore[attr-defined]
    assert info.meta == ObjectMeta(user={"kind": "log"})  # type: ignore[attr-defined]
    new = version_chunks(store, "log")
    assert new[:10] == old and len(new) == 12
    assert stored_bytes(store) == len(data) + len(more)
    assert await get(store, "log") == data + more


async def test_append_rewrites_a_short_tail(store: BlobseerBackend) -> None:
    data = blob(3 * CHUNK + 10)
    await put(store, "log", data)
    old = version_chunks(store, "log")
    content = bytearray(data)
    for i in range(20):  # many small appends: the tail chunk grows, no tiny chunks
        piece = blob(1000, seed=i)
        await write_at(store, "log", len(content), piece)
        content += piece
    new = version_chunks(store, "log")
    assert new[:3] == old[:3] and len(new) == 4
    assert await get(store, "log") == bytes(content)


async def test_ranged_overwrite_matches_a_model(store: BlobseerBackend) -> None:
    rng = random.Random(7)
    content = bytearray(blob(5 * CHUNK + 123))
    await put(store, "k", bytes(content))
    for step in range(25):
        offset = rng.randrange(len(content) + 1)
        data = blob(rng.choice([1, 100, CHUNK - 1, CHUNK, 2 * CHUNK + 3]), seed=step)
        base = store.store.index.current("bkt", "k")
        assert base is not None
        info = await write_at(store, "k", offset, data)
        content[offset:offset + len(data)] = data
        assert info.size == len(content)  # type: ignore[attr-defined]
        # Chunks wholly outside the written range are shared, the others are not.
        untouched, start = set(), 0
        for i, ref in enumerate(base.chunks):
            tail_merge = i == len(base.chunks) - 1 and ref.size < CHUNK and offset == base.size
            if (start + ref.size <= offset and not tail_merge) or start >= offset + len(data):
                untouched.add(ref.id)
            start += ref.size
        after = set(version_chunks(store, "k"))
        assert after & {c.id for c in base.chunks} == untouched
    assert await get(store, "k") == bytes(content)
    assert await get(store, "k", byte_range=RangeRequest(first=CHUNK - 5, last=CHUNK + 5)) \
        == bytes(content[CHUNK - 5:CHUNK + 6])


async def test_write_at_creates_and_checks_offsets(store: BlobseerBackend) -> None:
    with pytest.raises(InvalidWriteOffset):
        await write_at(store, "new", 5, b"x")
    with pytest.raises(NoSuchKey):
        await write_at(store, "new", 0, b"x", if_match=md5_hex(b""))
    info = await write_at(store, "new", 0, b"hello", meta=ObjectMeta(content_type="text/x"))
    assert info.meta.content_type == "text/x"  # type: ignore[attr-defined]
    assert await get(store, "new") == b"hello"
    with pytest.raises(InvalidWriteOffset) as caught:
        await write_at(store, "new", 6, b"!")
    assert caught.value.size == 5
    with pytest.raises(InvalidWriteOffset):
        await write_at(store, "new", -1, b"!")
    with pytest.raises(PreconditionFailed):
        await write_at(store, "new", 5, b"!", if_match=md5_hex(b"other"))
    current = await store.head_object("bkt", "new")
    info = await write_at(store, "new", 5, b" world", if_match=current.etag)
    assert await get(store, "new") == b"hello world"
    unchanged = await write_at(store, "new", 3, b"")  # nothing to write: same version
    assert unchanged.etag == info.etag  # type: ignore[attr-defined]
    empty = await write_at(store, "empty", 0, b"")
    assert empty.size == 0 and await get(store, "empty") == b""  # type: ignore[attr-defined]


async def _held_body(data: bytes, release: asyncio.Event,
                     started: asyncio.Event) -> AsyncIterator[bytes]:
    started.set()
    await release.wait()
    yield data


async def test_write_at_from_a_stale_base_is_refused(store: BlobseerBackend) -> None:
    await put(store, "k", b"0123456789")
    for change, error in ((b"0123456789abc", ConditionalRequestConflict),
                          (b"0123", InvalidWriteOffset)):
        release, started = asyncio.Event(), asyncio.Event()
        size = (await store.head_object("bkt", "k")).size
        slow = asyncio.ensure_future(store.write_at(
            "bkt", "k", size, _held_body(b"tail", release, started)))
        await started.wait()
        await put(store, "k", change)  # another writer commits first
        release.set()
        with pytest.raises(error):
            await slow
        assert await get(store, "k") == change


async def test_append_only_offsets(store: BlobseerBackend) -> None:
    await put(store, "k", b"0123456789")
    with pytest.raises(InvalidWriteOffset) as caught:
        await write_at(store, "k", 4, b"x", append_only=True)
    assert caught.value.size == 10 and await get(store, "k") == b"0123456789"
    await write_at(store, "k", 10, b"ab", append_only=True)
    assert await get(store, "k") == b"0123456789ab"
    release, started = asyncio.Event(), asyncio.Event()
    slow = asyncio.ensure_future(store.write_at("bkt", "k", 12,
                                                _held_body(b"!", release, started),
                                                append_only=True))
    await started.wait()
    await write_at(store, "k", 12, b"cd", append_only=True)  # another appender wins
    release.set()
    with pytest.raises(InvalidWriteOffset):
        await slow
    assert await get(store, "k") == b"0123456789abcd"
