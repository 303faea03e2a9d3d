"""UploadPartCopy on the posix backend: copy_file_range from the source's file into the
part, ranges resolved as a GET resolves them, the source checked, no file descriptor or
temp file left behind."""

from __future__ import annotations

import errno
import os

import pytest

from backends.core.base import CompletedPart, ObjectMeta, PartCopyingBackend, RangeRequest
from backends.core.errors import (
    InvalidPart,
    InvalidRange,
    NoSuchKey,
    NoSuchUpload,
    PreconditionFailed,
)
from backends.core.streams import body_of
from backends.multipart import multipart_etag
from backends.posix import PosixBackend
from tests.backends.conformance import blob, md5_hex
from tests.backends.posix.support import MIN_PART, get, open_fds, put


async def test_whole_and_ranged_part_copies(posix: PosixBackend) -> None:
    assert isinstance(posix, PartCopyingBackend)
    data = blob(3 * MIN_PART + 5, seed=1)
    src = await put(posix, "src", data)
    up = await posix.create_multipart_upload("bkt", "dst", meta=ObjectMeta())
    fds = open_fds()
    whole = await posix.upload_part_copy("bkt", "src", "bkt", "dst", up.upload_id, 1,
                                         src_etag=src.etag)  # type: ignore[attr-defined]
    assert (whole.etag, whole.size) == (md5_hex(data), len(data))  # the source's ETag
    ranged = await posix.upload_part_copy("bkt", "src", "bkt", "dst", up.upload_id, 2,
                                          byte_range=RangeRequest(first=7, last=MIN_PART + 6))
    assert (ranged.etag, ranged.size) == (md5_hex(data[7:MIN_PART + 7]), MIN_PART)
    past_end = await posix.upload_part_copy("bkt", "src", "bkt", "dst", up.upload_id, 3,
                                            byte_range=RangeRequest(first=len(data) - 3,
                                                                    last=len(data) + 100))
    assert past_end.etag == md5_hex(data[-3:])  # the end is clamped, as for a GET
    suffix = await posix.upload_part_copy("bkt", "src", "bkt", "dst", up.upload_id, 4,
                                          byte_range=RangeRequest(suffix=10))
    assert open_fds() == fds
    assert [p.part_number for p in await posix.list_parts("bkt", "dst", up.upload_id)] == \
        [1, 2, 3, 4]
    parts = [whole, ranged, suffix]
    info = await posix.complete_multipart_upload(
        "bkt", "dst", up.upload_id, [CompletedPart(p.part_number, p.etag) for p in parts])
    assert info.etag == multipart_etag(parts)
    assert await get(posix, "dst") == data + data[7:MIN_PART + 7] + data[-10:]
    assert await get(posix, "src") == data  # untouched


async def test_a_multipart_source_gets_the_md5_of_its_bytes(posix: PosixBackend) -> None:
    parts = [blob(MIN_PART, seed=2), b"end"]
    up = await posix.create_multipart_upload("bkt", "mp", meta=ObjectMeta())
    infos = [await posix.upload_part("bkt", "mp", up.upload_id, n + 1,
                                     body_of(d)) for n, d in enumerate(parts)]
    await posix.complete_multipart_upload(
        "bkt", "mp", up.upload_id, [CompletedPart(p.part_number, p.etag) for p in infos])
    dst = await posix.create_multipart_upload("bkt", "dst", meta=ObjectMeta())
    copied = await posix.upload_part_copy("bkt", "mp", "bkt", "dst", dst.upload_id, 1)  # type: ignore[attr-defined]
    assert copied.etag == md5_hex(b"".join(parts))


async def test_part_copy_errors(posix: PosixBackend) -> None:
    data = blob(1000, seed=3)
    await put(posix, "src", data)
    up = await posix.create_multipart_upload("bkt", "dst", meta=ObjectMeta())
    uid = up.upload_id
    copy = posix.upload_part_copy  # type: ignore[attr-defined]
    with pytest.raises(PreconditionFailed):
        await copy("bkt", "src", "bkt", "dst", uid, 1, src_etag=md5_hex(b"other"))
    with pytest.raises(NoSuchKey):
        await copy("bkt", "absent", "bkt", "dst", uid, 1)
    with pytest.raises(InvalidRange):
        await copy("bkt", "src", "bkt", "dst", uid, 1, byte_range=RangeRequest(first=1000))
    with pytest.raises(NoSuchUpload):
        await copy("bkt", "src", "bkt", "other", uid, 1)
    with pytest.raises(NoSuchUpload):
        await copy("bkt", "src", "bkt", "dst", "A" * 24, 1)
    with pytest.raises(InvalidPart):
        await copy("bkt", "src", "bkt", "dst", uid, 10_001)
    assert await posix.list_parts("bkt", "dst", uid) == []
    assert not any(posix.root.joinpath(".squall", "tmp").iterdir())


async def test_a_file_system_without_copy_offload_gets_a_plain_copy(
        posix: PosixBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    # Injected fault: copy_file_range refused with EXDEV (source and staging area on
    # different file systems), which one temporary directory cannot produce for real.
    def refuse(*_args: object) -> int:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    data = blob(2 * MIN_PART + 11, seed=4)
    await put(posix, "src", data)
    up = await posix.create_multipart_upload("bkt", "dst", meta=ObjectMeta())
    monkeypatch.setattr(os, "copy_file_range", refuse)
    part = await posix.upload_part_copy(  # type: ignore[attr-defined]
        "bkt", "src", "bkt", "dst", up.upload_id, 1,
        byte_range=RangeRequest(first=3, last=2 * MIN_PART + 5))
    assert part.etag == md5_hex(data[3:2 * MIN_PART + 6])
    await posix.complete_multipart_upload("bkt", "dst", up.upload_id,
                                          [CompletedPart(1, part.etag)])
    assert await get(posix, "dst") == data[3:2 * MIN_PART + 6]
