"""The tree on disk: readable by other tools, encoded keys, confinement to the bucket."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from backends.core.errors import BackendError, InvalidBucketName, InvalidKey, KeyTooLong, NoSuchKey
from backends.posix import PosixBackend
from tests.backends.conformance import collect
from tests.backends.posix.support import get, keys, put, tree_files


async def test_tree_is_readable_by_other_tools(posix: PosixBackend) -> None:
    await put(posix, "a/b/c.txt", b"hello")
    await put(posix, "top", b"level")
    await put(posix, "a/b/c.txt", b"hello again")
    assert tree_files(posix.root / "bkt") == {"a/b/c.txt": b"hello again", "top": b"level"}
    assert os.listdir(posix.root / ".squall" / "tmp") == []


@pytest.mark.parametrize(("key", "relpath"), [
    ("a//b", "a/%%q/b"),
    ("/lead", "%%q/lead"),
    ("trail/", "trail/%%q"),
    ("..", "%%q.."),
    (".", "%%q."),
    ("x/../y", "x/%%q../y"),
    ("%%q", "%%q%25%25q"),
    ("100%", "100%"),
    ("ü/日本", "ü/日本"),
])
async def test_encoded_layout(posix: PosixBackend, key: str, relpath: str) -> None:
    await put(posix, key, key.encode())
    assert tree_files(posix.root / "bkt") == {relpath: key.encode()}
    assert await keys(posix) == [key]


async def test_long_segments_become_continuation_directories(posix: PosixBackend) -> None:
    key = "L" * 600 + "/tail"
    await put(posix, key, b"long")
    [relpath] = tree_files(posix.root / "bkt")
    names = relpath.split("/")
    assert names[-1] == "tail" and all(n.startswith("%%c") for n in names[:-2])
    assert all(len(n.encode()) <= 255 for n in names)
    assert "".join(n.removeprefix("%%c") for n in names[:-1]) == "L" * 600
    assert await get(posix, key) == b"long"


async def test_object_displaced_by_a_directory_and_restored(posix: PosixBackend) -> None:
    bucket_dir = posix.root / "bkt"
    await put(posix, "d", b"object d")
    assert tree_files(bucket_dir) == {"d": b"object d"}
    await put(posix, "d/x", b"object d/x")
    assert tree_files(bucket_dir) == {"%%od": b"object d", "d/x": b"object d/x"}
    await put(posix, "d", b"d again")  # stays displaced while d/ exists
    assert tree_files(bucket_dir) == {"%%od": b"d again", "d/x": b"object d/x"}
    await posix.delete_object("bkt", "d/x")
    assert tree_files(bucket_dir) == {"d": b"d again"}
    assert sorted(os.listdir(bucket_dir)) == ["d"]
    assert await get(posix, "d") == b"d again"


async def test_delete_prunes_empty_directories(posix: PosixBackend) -> None:
    await put(posix, "a/b/c/d", b"1")
    await put(posix, "a/keep", b"2")
    await posix.delete_object("bkt", "a/b/c/d")
    assert sorted(os.listdir(posix.root / "bkt" / "a")) == ["keep"]
    await posix.delete_object("bkt", "a/keep")
    assert os.listdir(posix.root / "bkt") == []


@pytest.mark.parametrize("key", [
    "../outside", "../../outside", "a/../../../outside", "/../outside", "..%2foutside",
    "../.squall/format.json", "../bkt2/x", "./../outside"])
async def test_traversal_keys_stay_in_the_bucket(posix: PosixBackend, key: str) -> None:
    await posix.create_bucket("bkt2")
    outside = posix.root.parent
    before = tree_files(outside)
    await put(posix, key, b"payload")
    after = tree_files(outside)
    added = {p for p in after if p not in before or after[p] != before[p]}
    assert all(p.startswith(("root/bkt/", "root/.squall/meta/bkt/")) for p in added), added
    assert await get(posix, key) == b"payload"
    assert await keys(posix) == [key]
    assert await keys(posix, "bkt2") == []
    await posix.delete_object("bkt", key)
    assert os.listdir(posix.root / "bkt") == []


async def test_symlinked_directory_is_not_followed(posix: PosixBackend,
                                                   tmp_path: Path) -> None:
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    (secret_dir / "file").write_bytes(b"secret")
    os.symlink(secret_dir, posix.root / "bkt" / "link")
    for key in ("link/file", "link"):
        with pytest.raises(NoSuchKey):
            await posix.get_object("bkt", key)
        with pytest.raises(NoSuchKey):
            await posix.head_object("bkt", key)
    assert await keys(posix) == []
    with pytest.raises(BackendError):
        await put(posix, "link/new", b"x")
    await posix.delete_object("bkt", "link/file")
    assert sorted(os.listdir(secret_dir)) == ["file"]
    assert (secret_dir / "file").read_bytes() == b"secret"


async def test_symlinked_file_is_not_followed(posix: PosixBackend, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"outside")
    os.symlink(target, posix.root / "bkt" / "f")
    with pytest.raises(NoSuchKey):
        await posix.get_object("bkt", "f")
    assert await keys(posix) == []
    await posix.delete_object("bkt", "f")
    assert os.path.islink(posix.root / "bkt" / "f")  # noqa: ASYNC240  not ours: left alone
    await put(posix, "f", b"inside")  # replaces the link itself, not its target
    assert not os.path.islink(posix.root / "bkt" / "f")  # noqa: ASYNC240  a test
    assert target.read_bytes() == b"outside"
    assert await get(posix, "f") == b"inside"


async def test_fifo_in_the_tree_is_ignored(posix: PosixBackend) -> None:
    os.mkfifo(posix.root / "bkt" / "pipe")
    with pytest.raises(NoSuchKey):
        await posix.get_object("bkt", "pipe")
    assert await keys(posix) == []


@pytest.mark.parametrize("name", ["", ".", "..", ".squall", ".hidden", "a/b", "x" * 256])
async def test_invalid_bucket_names(posix: PosixBackend, name: str) -> None:
    with pytest.raises(InvalidBucketName):
        await posix.create_bucket(name)
    with pytest.raises(InvalidBucketName):
        await posix.head_bucket(name)
    with pytest.raises(InvalidBucketName):
        await put(posix, "k", b"v", bucket=name)
    with pytest.raises(InvalidBucketName):
        await collect(posix.iter_objects(name))
    assert [b.name for b in await posix.list_buckets()] == ["bkt"]


async def test_invalid_keys(posix: PosixBackend) -> None:
    with pytest.raises(InvalidKey):
        await put(posix, "", b"v")
    with pytest.raises(KeyTooLong):
        await put(posix, "k" * 1025, b"v")
    with pytest.raises(KeyTooLong):
        await posix.get_object("bkt", "é" * 600)
    longest = "é" * 400 + "/" + "é" * 111 + "x"  # 1024 bytes, one segment of 800
    assert len(longest.encode()) == 1024
    await put(posix, longest, b"ok")
    assert await get(posix, longest) == b"ok"
    assert os.listdir(posix.root / ".squall" / "tmp") == []


async def test_foreign_names_in_the_escape_space_are_ignored(posix: PosixBackend) -> None:
    bucket_dir = posix.root / "bkt"
    (bucket_dir / "%%qabc").write_bytes(b"1")  # "abc" would be stored plain
    (bucket_dir / "%%zzz").write_bytes(b"2")
    (bucket_dir / "%%cshort").mkdir()
    (bucket_dir / "%%cshort" / "x").write_bytes(b"3")
    await put(posix, "real", b"r")
    assert await keys(posix) == ["real"]
    with pytest.raises(NoSuchKey):
        await posix.head_object("bkt", "abc")


async def test_names_that_are_not_utf8_are_skipped(posix: PosixBackend) -> None:
    bucket_dir = bytes(posix.root / "bkt")
    os.mkdir(bucket_dir + b"/dir\xff")
    for name in (b"/dir\xff/f", b"/bad\xfe"):
        os.close(os.open(bucket_dir + name, os.O_WRONLY | os.O_CREAT, 0o644))
    await put(posix, "good", b"g")
    assert await keys(posix) == ["good"]


async def test_concurrent_displacement(posix: PosixBackend) -> None:
    keys_ = ["d", "d/x", "d/x/y", "d/z"]
    for round_ in range(6):
        await asyncio.gather(*(put(posix, k, f"{k}@{round_}".encode()) for k in keys_))
        for k in keys_:
            assert await get(posix, k) == f"{k}@{round_}".encode()
        assert await keys(posix) == keys_
        victims = keys_[1:3] if round_ % 2 else keys_[::2]
        await asyncio.gather(*(posix.delete_object("bkt", k) for k in victims),
                             *(put(posix, k, b"again") for k in keys_ if k not in victims))
        assert await keys(posix) == [k for k in keys_ if k not in victims]
        await asyncio.gather(*(posix.delete_object("bkt", k) for k in keys_))
        assert os.listdir(posix.root / "bkt") == []
