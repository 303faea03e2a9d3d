"""Object records on real files: xattr and sidecar, validity, damaged records."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backends.core.base import ObjectMeta
from backends.metajson import meta_from_json, meta_to_json
from backends.posix.metadata import XATTR_NAME, MetaStore, Record

META = ObjectMeta(content_type="text/plain", cache_control="no-cache", user={"a": "ü"},
                  tags={"t": "1"}, checksum=("SHA1", "c2hh"))


@pytest.fixture(params=[True, False], ids=["xattr", "sidecar"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MetaStore:
    (tmp_path / "meta").mkdir()
    (tmp_path / "tmp").mkdir()
    return MetaStore(tmp_path / "meta", tmp_path / "tmp", use_xattrs=request.param,
                     durable=True)


def object_file(tmp_path: Path, data: bytes = b"data") -> tuple[int, os.stat_result]:
    path = tmp_path / "obj"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    return fd, os.fstat(fd)


def test_meta_json_round_trip() -> None:
    assert meta_from_json(meta_to_json(META)) == META
    assert meta_from_json(meta_to_json(ObjectMeta())) == ObjectMeta()
    assert meta_to_json(ObjectMeta()) == {"content_type": "binary/octet-stream"}


@pytest.mark.parametrize("bad", [{"user": {"a": 1}}, {"tags": []}, {"checksum": ["x"]},
                                 {"content_type": 5}])
def test_malformed_meta_json(bad: dict) -> None:
    with pytest.raises(ValueError):
        meta_from_json(bad)


def test_store_and_load(store: MetaStore, tmp_path: Path) -> None:
    fd, st = object_file(tmp_path)
    try:
        assert store.load("b", "k", fd, st) is None
        record = Record("e" * 32, st.st_size, st.st_mtime_ns, META)
        store.store("b", "k", fd, record, current_ino=None)
        loaded = store.load("b", "k", fd, st)
        assert loaded is not None and (loaded.etag, loaded.meta) == (record.etag, META)
        if not store.use_xattrs:  # an xattr belongs to the file, a sidecar to the key
            assert store.load("b", "other-key", fd, st) is None
    finally:
        os.close(fd)


def test_stale_records_are_ignored(store: MetaStore, tmp_path: Path) -> None:
    fd, st = object_file(tmp_path)
    try:
        store.store("b", "k", fd, Record("e" * 32, st.st_size, st.st_mtime_ns, META),
                    current_ino=None)
        with open(tmp_path / "obj", "ab") as f:
            f.write(b"more")
        assert store.load("b", "k", fd, os.fstat(fd)) is None
    finally:
        os.close(fd)


def test_damaged_xattr_is_treated_as_no_record(tmp_path: Path) -> None:
    (tmp_path / "meta").mkdir()
    store = MetaStore(tmp_path / "meta", tmp_path, use_xattrs=True, durable=False)
    fd, st = object_file(tmp_path)
    try:
        for blob in (b"not json", b"[]", b'{"magic": "squall.meta", "v": 2, "etag": "x"}',
                     b'{"magic": "squall.meta", "v": 1, "etag": 5, "size": 1}'):
            os.setxattr(fd, XATTR_NAME, blob)
            assert store.load("b", "k", fd, st) is None
    finally:
        os.close(fd)


def test_damaged_sidecar_is_treated_as_no_record(tmp_path: Path) -> None:
    (tmp_path / "meta").mkdir()
    store = MetaStore(tmp_path / "meta", tmp_path, use_xattrs=False, durable=False)
    fd, st = object_file(tmp_path)
    try:
        store.store("b", "k", fd, Record("e" * 32, st.st_size, st.st_mtime_ns, META),
                    current_ino=None)
        path = store.sidecar_path("b", "k")
        other_key = b'{"magic": "squall.sidecar", "v": 1, "key": "other", "records": []}'
        for blob in (b"{", other_key, b'{"magic": "x"}'):
            path.write_bytes(blob)
            assert store.load("b", "k", fd, st) is None
    finally:
        os.close(fd)


def test_sidecar_keeps_the_current_files_record(tmp_path: Path) -> None:
    (tmp_path / "meta").mkdir()
    store = MetaStore(tmp_path / "meta", tmp_path, use_xattrs=False, durable=False)
    old_fd, old_st = object_file(tmp_path, b"old")
    new_path = tmp_path / "new"
    new_path.write_bytes(b"newer")
    new_fd = os.open(new_path, os.O_RDONLY)
    try:
        store.store("b", "k", old_fd, Record("1" * 32, 3, old_st.st_mtime_ns, META),
                    current_ino=None)
        new_st = os.fstat(new_fd)
        store.store("b", "k", new_fd, Record("2" * 32, 5, new_st.st_mtime_ns, ObjectMeta()),
                    current_ino=old_st.st_ino)
        # A stream already open on the old file still finds its record.
        old, new = store.load("b", "k", old_fd, old_st), store.load("b", "k", new_fd, new_st)
        assert old is not None and old.etag == "1" * 32
        assert new is not None and new.etag == "2" * 32
        store.forget("b", "k")
        assert store.load("b", "k", new_fd, new_st) is None
    finally:
        os.close(old_fd)
        os.close(new_fd)
