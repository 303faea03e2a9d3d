"""Bodies whose bytes lie in files and whose MD5 is known (a cache flush): the posix
backend copies them file to file (past the page cache where it can), takes the MD5 it is
given and reads nothing through Python; any other body is read and hashed as before."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from backends.core.base import BodyFacts, DescribedBody, ObjectMeta
from backends.core.blocking import run_blocking
from backends.core.regions import FileRegion
from backends.direct_io import COPY_CHUNK
from backends.files import copy_data
from backends.posix import PosixBackend
from tests.backends.conformance import blob, md5_hex
from tests.backends.posix.support import MIN_PART, get
from tests.support.page_cache import resident_pages, writes_direct


class RegionBody(DescribedBody):
    """Two regions of one open file, offered whole; iterating it is a failure."""

    def __init__(self, fd: int, pieces: list[tuple[int, int]], md5: bytes | None) -> None:
        super().__init__(BodyFacts(verified_md5=md5))
        self.regions = [FileRegion(fd, offset, count, run_blocking) for offset, count in pieces]
        self.read = False

    async def __anext__(self) -> bytes:
        self.read = True
        raise StopAsyncIteration

    async def take_regions(self) -> list[FileRegion]:
        return self.regions


@pytest.fixture
def source(tmp_path: Path) -> tuple[int, bytes]:
    data = blob(2 * MIN_PART + 11, seed=3)
    path = tmp_path / "source"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    yield fd, data
    os.close(fd)


async def test_put_and_part_copy_regions_and_take_the_known_md5(
        posix: PosixBackend, source: tuple[int, bytes]) -> None:
    fd, data = source
    pieces = [(5, MIN_PART), (MIN_PART + 100, MIN_PART - 89)]
    want = b"".join(data[offset:offset + count] for offset, count in pieces)
    body = RegionBody(fd, pieces, hashlib.md5(want).digest())
    info = await posix.put_object("bkt", "k", body, meta=ObjectMeta())  # type: ignore[arg-type]
    assert not body.read and (info.etag, info.size) == (md5_hex(want), len(want))
    assert await get(posix, "k") == want
    up = await posix.create_multipart_upload("bkt", "mp", meta=ObjectMeta())
    part = await posix.upload_part("bkt", "mp", up.upload_id, 1,
                                   RegionBody(fd, pieces, hashlib.md5(want).digest()),  # type: ignore[arg-type]
                                   content_md5=hashlib.md5(want).digest())
    assert (part.etag, part.size) == (md5_hex(want), len(want))


async def test_a_large_region_copy_leaves_the_object_out_of_the_page_cache(
        tmp_path: Path) -> None:
    if not writes_direct(tmp_path):
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT")
    data = blob(9 << 20, seed=5)
    path = tmp_path / "cache-file"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    store = PosixBackend(tmp_path / "root", min_part_size=MIN_PART, chunk_size=1 << 20)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        await store.create_bucket("bkt")
        want = data[16:]  # after a header, as in the cache's data files
        body = RegionBody(fd, [(16, len(want))], hashlib.md5(want).digest())
        info = await store.put_object("bkt", "k", body, meta=ObjectMeta())  # type: ignore[arg-type]
        stored = tmp_path / "root" / "bkt" / "k"
        reads = -(-len(want) // COPY_CHUNK)
        assert resident_pages(stored, 0, info.size) <= 2 * reads  # partial pages at their ends
        assert resident_pages(path, 0, len(data)) == 0
        assert await get(store, "k") == want
    finally:
        os.close(fd)
        await store.aclose()


async def test_a_body_without_a_known_md5_is_read_and_hashed(
        posix: PosixBackend, source: tuple[int, bytes]) -> None:
    fd, _data = source
    body = RegionBody(fd, [(0, 10)], None)
    info = await posix.put_object("bkt", "empty", body, meta=ObjectMeta())  # type: ignore[arg-type]
    assert body.read and (info.etag, info.size) == (md5_hex(b""), 0)


def test_copy_data_from_an_offset(tmp_path: Path) -> None:
    data = blob(3 * 4096 + 7, seed=4)
    (tmp_path / "src").write_bytes(data)
    src = os.open(tmp_path / "src", os.O_RDONLY)
    dst = os.open(tmp_path / "dst", os.O_RDWR | os.O_CREAT)
    try:
        copy_data(src, dst, 5000, src_offset=4000, dst_offset=10, chunk_size=1024)
        with pytest.raises(OSError):
            copy_data(src, dst, 100, src_offset=len(data) - 50, dst_offset=6000,
                      chunk_size=1024)  # the source ends first
    finally:
        os.close(src)
        os.close(dst)
    assert (tmp_path / "dst").read_bytes()[10:5010] == data[4000:9000]
