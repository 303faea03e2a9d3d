"""Buckets as directories of the root, with their creation time in the hidden area.

All functions block; the backend calls them through run_blocking.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from pathlib import Path

from backends.core.base import BucketInfo
from backends.core.errors import (
    BackendError,
    BucketAlreadyOwnedByYou,
    BucketNotEmpty,
    InvalidBucketName,
    NoSuchBucket,
)
from backends.core.keys import check_bucket
from backends.files import fsync_dir, read_small, remove_tree, write_atomic
from backends.posix.hidden import HiddenArea

BUCKET_MAGIC = "squall.bucket"
BUCKET_VERSION = 1


def _record_path(hidden: HiddenArea, bucket: str) -> Path:
    return hidden.buckets / f"{bucket}.json"


def _is_dir(path: Path) -> os.stat_result | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return st if stat.S_ISDIR(st.st_mode) else None


def _info(hidden: HiddenArea, bucket: str, st: os.stat_result) -> BucketInfo:
    try:
        data = json.loads(read_small(_record_path(hidden, bucket)))
        if (isinstance(data, dict) and data.get("magic") == BUCKET_MAGIC
                and data.get("v") == BUCKET_VERSION
                and isinstance(data.get("created"), int | float)):
            return BucketInfo(bucket, float(data["created"]))
    except (FileNotFoundError, ValueError):
        pass
    return BucketInfo(bucket, st.st_mtime)  # a directory another tool made


def create(hidden: HiddenArea, bucket: str, *, durable: bool) -> BucketInfo:
    check_bucket(bucket)
    path = hidden.root / bucket
    if os.path.lexists(path):
        if _is_dir(path) is None:
            raise BackendError(f"Cannot create bucket {bucket!r}: a file of that name is "
                               "in the backend root.")
        raise BucketAlreadyOwnedByYou(bucket)
    # State left by a bucket of this name removed behind Squall's back.
    remove_tree(hidden.meta / bucket)
    remove_tree(hidden.uploads / bucket)
    try:
        os.mkdir(path)
    except FileExistsError as exc:
        raise BucketAlreadyOwnedByYou(bucket) from exc
    created = time.time()
    blob = json.dumps({"magic": BUCKET_MAGIC, "v": BUCKET_VERSION, "created": created})
    write_atomic(_record_path(hidden, bucket), blob.encode(), tmp_dir=hidden.tmp,
                 durable=durable)
    if durable:
        fsync_dir(hidden.root)
    return BucketInfo(bucket, created)


def head(hidden: HiddenArea, bucket: str) -> BucketInfo:
    check_bucket(bucket)
    st = _is_dir(hidden.root / bucket)
    if st is None:
        raise NoSuchBucket(bucket)
    return _info(hidden, bucket, st)


def list_all(hidden: HiddenArea) -> list[BucketInfo]:
    found = []
    with os.scandir(hidden.root) as entries:
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                check_bucket(entry.name)
                st = entry.stat(follow_symlinks=False)
            except (InvalidBucketName, FileNotFoundError):
                continue  # not a name Squall can serve, or removed meanwhile
            found.append(_info(hidden, entry.name, st))
    return sorted(found, key=lambda b: b.name)


def _remove_empty_dirs(path: Path) -> bool:
    """Remove ``path`` if it holds nothing but directories; False if anything else is there.

    Empty directories are no objects: a crash between an unlink and the pruning of its
    directories, or another tool, can leave them behind.
    """
    for dirpath, dirnames, filenames in os.walk(path, topdown=False):
        if filenames:  # files, symlinks, fifos...: objects or something not ours
            return False
        for name in dirnames:
            if os.path.islink(os.path.join(dirpath, name)):
                return False
            try:
                os.rmdir(os.path.join(dirpath, name))
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    return False  # a concurrent put
                if exc.errno != errno.ENOENT:
                    raise
    try:
        os.rmdir(path)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise
    return True


def delete(hidden: HiddenArea, bucket: str, *, durable: bool) -> None:
    """Remove a bucket without objects (nor foreign files); its multipart uploads in
    progress are aborted with it, as S3 does."""
    head(hidden, bucket)
    internal = hidden.internal / bucket
    if internal.is_dir() and not _remove_empty_dirs(internal):
        raise BucketNotEmpty(bucket)  # version records remain
    path = hidden.root / bucket
    try:
        os.rmdir(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise NoSuchBucket(bucket) from exc
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        if not _remove_empty_dirs(path):
            raise BucketNotEmpty(bucket) from exc
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_record_path(hidden, bucket))
    remove_tree(hidden.meta / bucket)
    remove_tree(hidden.uploads / bucket)
    if durable:
        fsync_dir(hidden.root)
        fsync_dir(hidden.buckets)
