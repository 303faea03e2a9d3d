"""PosixBackend: the conformance suite (xattr and sidecar metadata), then posix-only
behaviour: metadata storage, foreign files, resources, crash leftovers, restarts."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backends.core.base import (
    Backend,
    CompletedPart,
    CopyingBackend,
    MultipartBackend,
    ObjectMeta,
    RangeRequest,
    bare,
)
from backends.core.errors import (
    BackendError,
    BucketNotEmpty,
    InvalidBucketName,
    InvalidPart,
    InvalidRange,
    NoSuchBucket,
    NoSuchKey,
    PreconditionFailed,
)
from backends.posix import PosixBackend
from backends.posix.metadata import XATTR_NAME
from tests.backends.conformance import (
    BackendConformance,
    BodyFailure,
    blob,
    body_of,
    collect,
    failing_body,
    md5_hex,
    read_all,
)
from tests.backends.posix.support import MIN_PART, get, keys, open_fds, put


class TestPosixConformance(BackendConformance):
    min_part_size = MIN_PART

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[PosixBackend]:
        store = PosixBackend(tmp_path / "root", min_part_size=self.min_part_size,
                             chunk_size=256 * 1024)
        yield store
        await store.aclose()


class TestPosixSidecarConformance(BackendConformance):
    """Metadata in sidecar files (as without user xattrs), and no fsync at all."""

    min_part_size = MIN_PART

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[PosixBackend]:
        store = PosixBackend(tmp_path / "root", min_part_size=self.min_part_size,
                             chunk_size=100_000, use_xattrs=False, durability="none")
        yield store
        await store.aclose()


# -- posix-specific (the tree itself: test_tree.py) ---------------------------------

async def test_metadata_in_xattr(tmp_path: Path) -> None:
    store = PosixBackend(tmp_path / "root")
    await store.create_bucket("bkt")
    await put(store, "k", b"data", meta=ObjectMeta(user={"a": "b"}))
    assert store.xattrs  # detected on this file system
    record = json.loads(os.getxattr(store.root / "bkt" / "k", XATTR_NAME))
    assert (record["magic"], record["v"], record["etag"]) == ("squall.meta", 1, md5_hex(b"data"))
    assert record["meta"]["user"] == {"a": "b"}
    assert not any((store.root / ".squall" / "meta").rglob("*"))


async def test_metadata_in_sidecars(tmp_path: Path) -> None:
    store = PosixBackend(tmp_path / "root", use_xattrs=False)
    await store.create_bucket("bkt")
    await put(store, "a/k", b"data", meta=ObjectMeta(tags={"t": "1"}))
    assert XATTR_NAME not in os.listxattr(store.root / "bkt" / "a" / "k")
    sidecars = [p for p in (store.root / ".squall" / "meta" / "bkt").rglob("*") if p.is_file()]
    assert len(sidecars) == 1
    data = json.loads(sidecars[0].read_bytes())
    assert (data["magic"], data["v"], data["key"]) == ("squall.sidecar", 1, "a/k")
    assert (await store.head_object("bkt", "a/k")).meta.tags == {"t": "1"}
    await store.delete_object("bkt", "a/k")
    assert not sidecars[0].exists()
    await store.delete_bucket("bkt")
    assert not (store.root / ".squall" / "meta" / "bkt").exists()


async def test_metadata_too_big_for_an_xattr(tmp_path: Path) -> None:
    store = PosixBackend(tmp_path / "root", use_xattrs=True)
    await store.create_bucket("bkt")
    meta = ObjectMeta(user={f"key{i}": "v" * 200 for i in range(60)})  # ~12 KB of JSON
    await put(store, "k", b"data", meta=meta)
    assert (await store.head_object("bkt", "k")).meta == meta
    await store.replace_metadata("bkt", "k", ObjectMeta(user={"small": "1"}))
    assert (await store.head_object("bkt", "k")).meta == ObjectMeta(user={"small": "1"})
    await store.replace_metadata("bkt", "k", meta)
    [listed] = await collect(store.iter_objects("bkt"))
    assert listed.meta == meta and listed.etag == md5_hex(b"data")


async def test_foreign_files_are_listed_and_readable(posix: PosixBackend) -> None:
    bucket_dir = posix.root / "bkt"
    (bucket_dir / "made" / "by").mkdir(parents=True)
    (bucket_dir / "made" / "by" / "cp.bin").write_bytes(b"foreign bytes")
    (bucket_dir / "plain.txt").write_bytes(b"")
    await put(posix, "ours", b"ours")
    infos = {i.key: i for i in await collect(posix.iter_objects("bkt"))}
    assert sorted(infos) == ["made/by/cp.bin", "ours", "plain.txt"]
    assert infos["made/by/cp.bin"].etag == md5_hex(b"foreign bytes")
    assert infos["made/by/cp.bin"].meta == ObjectMeta()
    assert infos["plain.txt"].etag == md5_hex(b"")
    assert await get(posix, "made/by/cp.bin") == b"foreign bytes"
    head = await posix.head_object("bkt", "made/by/cp.bin")
    assert (head.size, head.etag) == (13, md5_hex(b"foreign bytes"))
    stream = await posix.get_object("bkt", "made/by/cp.bin",
                                    byte_range=RangeRequest(first=8))
    assert await read_all(stream) == b"bytes"
    await posix.delete_object("bkt", "made/by/cp.bin")
    assert sorted(os.listdir(bucket_dir)) == ["ours", "plain.txt"]


async def test_object_changed_in_place_by_another_tool(posix: PosixBackend) -> None:
    await put(posix, "k", b"original", meta=ObjectMeta(user={"a": "1"}))
    path = posix.root / "bkt" / "k"
    path.write_bytes(b"changed by another tool")  # same inode, new size
    head = await posix.head_object("bkt", "k")
    assert head.etag == md5_hex(b"changed by another tool")
    assert head.meta == ObjectMeta()  # the record described other bytes
    assert await get(posix, "k") == b"changed by another tool"
    with pytest.raises(PreconditionFailed):
        await posix.put_object("bkt", "k", body_of(b"x"), meta=ObjectMeta(),
                               if_match=md5_hex(b"original"))
    await posix.put_object("bkt", "k", body_of(b"x"), meta=ObjectMeta(),
                           if_match=head.etag)


async def test_streams_and_listings_release_file_descriptors(posix: PosixBackend) -> None:
    for i in range(5):
        await put(posix, f"dir/k{i}", blob(200_000, seed=i))
    baseline = open_fds()
    for _ in range(10):
        await (await posix.get_object("bkt", "dir/k0")).aclose()
        stream = await posix.get_object("bkt", "dir/k1")
        await stream.__aiter__().__anext__()
        await stream.aclose()
        await read_all(await posix.get_object("bkt", "dir/k2"))
        with pytest.raises(InvalidRange):
            await posix.get_object("bkt", "dir/k3", byte_range=RangeRequest(first=10**9))
        iterator: Any = posix.iter_objects("bkt")  # an async generator: it has aclose()
        await iterator.__anext__()
        await iterator.aclose()
        await collect(posix.iter_objects("bkt", prefix="dir/"))
        with pytest.raises(BodyFailure):
            await posix.put_object("bkt", "dir/k4", failing_body(blob(300_000), 100_000),
                                   meta=ObjectMeta())
        await posix.head_object("bkt", "dir/k4")
        await posix.copy_object("bkt", "dir/k0", "bkt", "copy", meta=ObjectMeta())
    assert open_fds() == baseline


async def test_cancelled_reader_releases_its_file(posix: PosixBackend) -> None:
    await put(posix, "k", blob(2 << 20))
    baseline = open_fds()
    stream = await posix.get_object("bkt", "k")
    first = asyncio.Event()

    async def reader() -> None:
        async for _ in stream:
            first.set()

    task = asyncio.ensure_future(reader())
    await first.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await stream.aclose()
    assert open_fds() == baseline


async def test_delete_bucket_with_leftover_directories(posix: PosixBackend) -> None:
    (posix.root / "bkt" / "empty" / "dirs").mkdir(parents=True)
    (posix.root / "bkt" / "more").mkdir()
    await posix.delete_bucket("bkt")
    assert not (posix.root / "bkt").exists()
    await posix.create_bucket("bkt")
    (posix.root / "bkt" / "d").mkdir()
    os.symlink("/", posix.root / "bkt" / "d" / "link")
    with pytest.raises(BucketNotEmpty):
        await posix.delete_bucket("bkt")
    assert os.path.islink(posix.root / "bkt" / "d" / "link")  # noqa: ASYNC240  a test


async def test_file_in_place_of_a_bucket(posix: PosixBackend) -> None:
    (posix.root / "plainfile").write_bytes(b"x")
    with pytest.raises(BackendError):
        await posix.create_bucket("plainfile")
    with pytest.raises(NoSuchBucket):
        await posix.head_bucket("plainfile")
    with pytest.raises(NoSuchBucket):
        await put(posix, "k", b"v", bucket="plainfile")


async def test_cancelled_put_leaves_nothing(posix: PosixBackend) -> None:
    started = asyncio.Event()

    async def stalled() -> AsyncIterator[bytes]:
        yield blob(300_000)
        started.set()
        await asyncio.Event().wait()  # a client that stops sending
        yield b"never"

    task = asyncio.ensure_future(posix.put_object("bkt", "k", bare(stalled()), meta=ObjectMeta()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert os.listdir(posix.root / ".squall" / "tmp") == []
    with pytest.raises(NoSuchKey):
        await posix.head_object("bkt", "k")
    assert await keys(posix) == []


async def test_copy_file_range_refused_falls_back(posix: PosixBackend,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # Fault injection: a file system without copy_file_range cannot be produced here.
    def refuse(*args: object) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    first, last = blob(MIN_PART, seed=1), blob(70_001, seed=2)
    upload = await posix.create_multipart_upload("bkt", "mp", meta=ObjectMeta())
    p1 = await posix.upload_part("bkt", "mp", upload.upload_id, 1, body_of(first))
    p2 = await posix.upload_part("bkt", "mp", upload.upload_id, 2, body_of(last))
    await posix.complete_multipart_upload(
        "bkt", "mp", upload.upload_id, [CompletedPart(1, p1.etag), CompletedPart(2, p2.etag)])
    assert await get(posix, "mp") == first + last
    await posix.copy_object("bkt", "mp", "bkt", "copy", meta=ObjectMeta())
    assert await get(posix, "copy") == first + last


async def test_multipart_staging_lives_in_the_hidden_area(posix: PosixBackend) -> None:
    upload = await posix.create_multipart_upload("bkt", "k", meta=ObjectMeta())
    staging = posix.root / ".squall" / "uploads" / "bkt" / upload.upload_id
    await posix.upload_part("bkt", "k", upload.upload_id, 1, body_of(b"one"))
    await posix.upload_part("bkt", "k", upload.upload_id, 1, body_of(b"uno"))
    names = set(os.listdir(staging))
    assert {"part-00001.json", "upload.json"} < names
    [data] = names - {"part-00001.json", "upload.json"}  # the replaced part's data is gone
    assert data.startswith("part-00001.")
    assert os.listdir(posix.root / "bkt") == []
    with pytest.raises(InvalidPart):
        await posix.upload_part("bkt", "k", upload.upload_id, 0, body_of(b"x"))
    with pytest.raises(InvalidPart):
        await posix.upload_part("bkt", "k", upload.upload_id, 10_001, body_of(b"x"))
    await posix.complete_multipart_upload("bkt", "k", upload.upload_id,
                                          [CompletedPart(1, md5_hex(b"uno"))])
    assert not staging.exists()
    assert os.listdir(posix.root / ".squall" / "tmp") == []


async def test_state_survives_a_restart(tmp_path: Path) -> None:
    first = PosixBackend(tmp_path / "root")
    created = await first.create_bucket("bkt")
    await put(first, "k", b"data", meta=ObjectMeta(user={"a": "1"}, content_type="text/x"))
    upload = await first.create_multipart_upload("bkt", "mp", meta=ObjectMeta(tags={"t": "v"}))
    await first.upload_part("bkt", "mp", upload.upload_id, 1, body_of(b"part"))
    await first.aclose()
    with pytest.raises(BackendError):
        await first.head_bucket("bkt")
    second = PosixBackend(tmp_path / "root")
    assert await second.list_buckets() == [created]
    head = await second.head_object("bkt", "k")
    assert (head.etag, head.meta) == (md5_hex(b"data"),
                                      ObjectMeta(user={"a": "1"}, content_type="text/x"))
    [listed] = await collect(second.iter_multipart_uploads("bkt"))
    assert (listed.upload_id, listed.meta) == (upload.upload_id, ObjectMeta(tags={"t": "v"}))
    info = await second.complete_multipart_upload("bkt", "mp", upload.upload_id,
                                                  [CompletedPart(1, md5_hex(b"part"))])
    assert info.size == 4


async def test_stale_temp_files_are_removed_at_start(tmp_path: Path) -> None:
    first = PosixBackend(tmp_path / "root")
    await first.list_buckets()
    tmp = tmp_path / "root" / ".squall" / "tmp"
    (tmp / "tmp-old").write_bytes(b"crash leftover")
    (tmp / "dropped-old").mkdir()
    (tmp / "tmp-new").write_bytes(b"in flight elsewhere")
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(tmp / "tmp-old", (day_ago, day_ago))
    os.utime(tmp / "dropped-old", (day_ago, day_ago))
    await PosixBackend(tmp_path / "root").list_buckets()
    assert os.listdir(tmp) == ["tmp-new"]


async def test_unknown_layout_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "root" / ".squall").mkdir(parents=True)
    (tmp_path / "root" / ".squall" / "format.json").write_text(
        json.dumps({"magic": "squall.posix", "version": 99}))
    store = PosixBackend(tmp_path / "root")
    with pytest.raises(BackendError):
        await store.list_buckets()
    with pytest.raises(BackendError):
        await store.create_bucket("bkt")


async def test_bucket_made_by_another_tool(posix: PosixBackend) -> None:
    (posix.root / "other").mkdir()
    (posix.root / "other" / "f").write_bytes(b"x")
    (posix.root / "a-file").write_bytes(b"not a bucket")
    (posix.root / "Bad_Name!").mkdir()
    names = [b.name for b in await posix.list_buckets()]
    assert "other" in names and "bkt" in names and "a-file" not in names
    head = await posix.head_bucket("other")
    assert head.created == os.stat(posix.root / "other").st_mtime
    assert await keys(posix, "other") == ["f"]


async def test_hidden_area_is_never_a_bucket(posix: PosixBackend) -> None:
    assert [b.name for b in await posix.list_buckets()] == ["bkt"]
    with pytest.raises(InvalidBucketName):
        await collect(posix.iter_objects(".squall"))


async def test_durability_none_round_trip(tmp_path: Path) -> None:
    store = PosixBackend(tmp_path / "root", durability="none", min_part_size=1)
    await store.create_bucket("bkt")
    data = blob(1_500_000)
    info = await store.put_object("bkt", "k", body_of(data, 333_333), meta=ObjectMeta(),
                                  content_md5=hashlib.md5(data).digest())
    assert info.etag == md5_hex(data) and await get(store, "k") == data


def test_implements_the_protocols(tmp_path: Path) -> None:
    store = PosixBackend(tmp_path)
    assert isinstance(store, Backend)
    assert isinstance(store, MultipartBackend)
    assert isinstance(store, CopyingBackend)


def test_constructor_rejects_bad_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        PosixBackend(tmp_path, durability="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        PosixBackend(tmp_path, chunk_size=0)
    with pytest.raises(ValueError):
        PosixBackend(tmp_path, min_part_size=-1)
