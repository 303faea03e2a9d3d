"""Multipart uploads held in the cache; completion references part files."""

from __future__ import annotations

import base64
import zlib

import pytest

from backends.core.base import BodyFacts, CompletedPart, DescribedBody, RangeRequest
from backends.core.errors import EntityTooSmall, InvalidPart, InvalidPartOrder, NoSuchUpload
from backends.core.upload_checksums import FULL_OBJECT, UploadChecksum, declare
from backends.multipart import multipart_etag
from gateway.cache.tier import CacheTier
from tests.gateway.cache.conftest import (
    BUCKET,
    META,
    Env,
    body,
    cache_settings,
    payload,
    read_all,
)

KiB = 1024


def _held(tier: CacheTier) -> int:
    """Bytes of the cache held by unflushed records and cached parts."""
    return int(tier.status()["cache_capacity_bytes"]) - tier.unflushed_room()


async def test_complete_is_an_index_operation_and_flush_keeps_etag(env: Env) -> None:
    tier = await env.tier()
    up = await tier.create_multipart_upload(BUCKET, "mp", meta=META)
    assert [u.upload_id async for u in tier.iter_multipart_uploads(BUCKET)] == [up.upload_id]
    data = [payload(6 * KiB, seed=i) for i in range(3)]
    infos = [await tier.upload_part(BUCKET, "mp", up.upload_id, i + 1, body(d))
             for i, d in enumerate(data)]
    # Replacing a part frees the earlier file.
    files_before = env.cache_files()
    infos[1] = await tier.upload_part(BUCKET, "mp", up.upload_id, 2, body(data[1]))
    assert len(env.cache_files()) == len(files_before)
    files_before = env.cache_files()
    assert [p.part_number for p in await tier.list_parts(BUCKET, "mp", up.upload_id)] == [1, 2, 3]
    used_before = tier.status()["cache_used_bytes"]
    info = await tier.complete_multipart_upload(
        BUCKET, "mp", up.upload_id, [CompletedPart(i.part_number, i.etag) for i in infos])
    assert info.etag == multipart_etag(infos) and info.size == 18 * KiB
    assert tier.status()["cache_used_bytes"] == used_before  # no data copied
    assert env.cache_files() == files_before
    assert [u async for u in tier.iter_multipart_uploads(BUCKET)] == []
    whole = b"".join(data)
    assert await read_all(await tier.get_object(BUCKET, "mp")) == whole
    for first, last in ((6 * KiB - 10, 6 * KiB + 9), (100, 17 * KiB), (12 * KiB, 12 * KiB)):
        got = await read_all(await tier.get_object(
            BUCKET, "mp", byte_range=RangeRequest(first=first, last=last)))
        assert got == whole[first:last + 1]  # ranges across part files
    await tier.wait_flushed()
    backend = env.backend()
    stored = await backend.head_object(BUCKET, "mp")
    assert stored.etag == info.etag
    assert await read_all(await backend.get_object(BUCKET, "mp")) == b"".join(data)


async def test_completion_errors_and_abort(env: Env) -> None:
    tier = await env.tier()
    up = await tier.create_multipart_upload(BUCKET, "mp", meta=META)
    p1 = await tier.upload_part(BUCKET, "mp", up.upload_id, 1, body(b"small"))
    await tier.upload_part(BUCKET, "mp", up.upload_id, 2, body(b"last"))
    p2 = await tier.upload_part(BUCKET, "mp", up.upload_id, 2, body(b"later"))  # replaced
    assert _held(tier) == len(b"small") + len(b"later")
    with pytest.raises(EntityTooSmall):
        await tier.complete_multipart_upload(
            BUCKET, "mp", up.upload_id, [CompletedPart(1, p1.etag), CompletedPart(2, p2.etag)])
    with pytest.raises(InvalidPartOrder):
        await tier.complete_multipart_upload(
            BUCKET, "mp", up.upload_id, [CompletedPart(2, p2.etag), CompletedPart(1, p1.etag)])
    with pytest.raises(InvalidPart):
        await tier.complete_multipart_upload(BUCKET, "mp", up.upload_id,
                                             [CompletedPart(1, "0" * 32)])
    with pytest.raises(NoSuchUpload):
        await tier.upload_part(BUCKET, "other-key", up.upload_id, 1, body(b"x"))
    await tier.abort_multipart_upload(BUCKET, "mp", up.upload_id)
    assert _held(tier) == 0
    with pytest.raises(NoSuchUpload):
        await tier.list_parts(BUCKET, "mp", up.upload_id)
    with pytest.raises(NoSuchUpload):
        await tier.abort_multipart_upload(BUCKET, "mp", up.upload_id)
    assert tier.status()["cache_used_bytes"] == 0 and env.cache_files() == set()


async def test_single_part_completion_and_unused_parts_freed(env: Env) -> None:
    tier = await env.tier(cache_settings(env.base, inline_max_bytes=0))  # parts in files
    up = await tier.create_multipart_upload(BUCKET, "one", meta=META)
    p1 = await tier.upload_part(BUCKET, "one", up.upload_id, 1, body(b"only part"))
    await tier.upload_part(BUCKET, "one", up.upload_id, 2, body(b"never used"))
    info = await tier.complete_multipart_upload(BUCKET, "one", up.upload_id,
                                                [CompletedPart(1, p1.etag)])
    assert info.etag.endswith("-1")
    assert len(env.cache_files()) == 1
    await tier.wait_flushed()
    backend = env.backend()
    assert (await backend.head_object(BUCKET, "one")).etag == info.etag
    assert await read_all(await backend.get_object(BUCKET, "one")) == b"only part"


async def test_uploads_survive_restart(env: Env) -> None:
    tier = await env.tier()
    up = await tier.create_multipart_upload(BUCKET, "mp", meta=META)
    p1 = await tier.upload_part(BUCKET, "mp", up.upload_id, 1, body(payload(5 * KiB)))
    await env.close(tier)
    tier = await env.tier(create_bucket=False)
    assert [p.etag for p in await tier.list_parts(BUCKET, "mp", up.upload_id)] == [p1.etag]
    assert _held(tier) == 5 * KiB  # the cached parts count against the room, reopened too
    p2 = await tier.upload_part(BUCKET, "mp", up.upload_id, 2, body(b"tail"))
    await tier.complete_multipart_upload(
        BUCKET, "mp", up.upload_id, [CompletedPart(1, p1.etag), CompletedPart(2, p2.etag)])
    assert await read_all(await tier.get_object(BUCKET, "mp")) == payload(5 * KiB) + b"tail"


class _VerifyingBody(DescribedBody):
    """Like the S3 layer's verifying bodies: ``facts.checksum`` is set once exhausted."""

    __slots__ = ("_checksum", "_chunks")

    def __init__(self, data: bytes, checksum: tuple[str, str]) -> None:
        super().__init__(BodyFacts(checksum_algorithm=checksum[0]))
        self._chunks = iter([data])
        self._checksum = checksum

    async def __anext__(self) -> bytes:
        try:
            return next(self._chunks)
        except StopIteration:
            self.facts.checksum = self._checksum
            raise StopAsyncIteration from None


async def test_part_checksums_give_the_composite_checksum_in_cache_and_backend(
        env: Env) -> None:
    tier = await env.tier()
    up = await tier.create_multipart_upload(BUCKET, "ck", meta=META)
    data = [payload(5 * KiB, 1), b"tail"]
    sums = [("CRC32", "AAAAAA=="), ("CRC32", "AQIDBA==")]
    infos = [await tier.upload_part(BUCKET, "ck", up.upload_id, n + 1,
                                    _VerifyingBody(d, sums[n]))  # type: ignore[arg-type]
             for n, d in enumerate(data)]
    assert [p.checksum for p in await tier.list_parts(BUCKET, "ck", up.upload_id)] == sums
    info = await tier.complete_multipart_upload(
        BUCKET, "ck", up.upload_id, [CompletedPart(i.part_number, i.etag) for i in infos])
    assert info.meta.checksum is not None and info.meta.checksum[1].endswith("-2")
    await tier.wait_flushed()
    stored = await env.backend().head_object(BUCKET, "ck")
    assert (stored.etag, stored.meta.checksum) == (info.etag, info.meta.checksum)


async def test_declared_full_object_checksum_survives_the_flush(env: Env) -> None:
    tier = await env.tier()
    meta = declare(META, UploadChecksum("CRC32", FULL_OBJECT))
    up = await tier.create_multipart_upload(BUCKET, "fo", meta=meta)
    data = [payload(5 * KiB, 2), b"the tail"]

    def crc(chunk: bytes) -> tuple[str, str]:
        return "CRC32", base64.b64encode(zlib.crc32(chunk).to_bytes(4, "big")).decode()
    infos = [await tier.upload_part(BUCKET, "fo", up.upload_id, n + 1,
                                    _VerifyingBody(d, crc(d)))  # type: ignore[arg-type]
             for n, d in enumerate(data)]
    info = await tier.complete_multipart_upload(
        BUCKET, "fo", up.upload_id, [CompletedPart(i.part_number, i.etag) for i in infos])
    assert info.meta.checksum == crc(b"".join(data))
    await tier.wait_flushed()
    stored = await env.backend().head_object(BUCKET, "fo")
    assert (stored.etag, stored.meta.checksum) == (info.etag, crc(b"".join(data)))
