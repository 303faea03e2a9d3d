"""Blocking operations on a bucket's directory tree, never leaving it.

Every path is walked one name at a time from the bucket directory with
``openat(O_NOFOLLOW)``: a symlink planted in the tree is never followed, and names come
from :mod:`backends.posix.layout`, so they are never ``.``, ``..`` or contain ``/``.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backends.core.errors import BackendError, NoSuchBucket
from backends.files import O_DIR, O_READ, fsync_dir
from backends.posix.layout import DISPLACED, KeyPath

_NOT_THERE = {errno.ENOENT, errno.ENOTDIR, errno.ELOOP}


class ParentGone(Exception):
    """A directory on the way was removed (a concurrent delete pruned it): retry."""


@dataclass(frozen=True, slots=True)
class Conflict:
    """``dirs[index]`` is a file (the object of ``owner``) where a directory is needed."""

    index: int
    owner: str


def open_bucket(root: Path, bucket: str) -> int:
    """An fd of the bucket directory (no symlink); NoSuchBucket if there is none."""
    try:
        return os.open(root / bucket, O_DIR)
    except OSError as exc:
        if exc.errno in _NOT_THERE:
            raise NoSuchBucket(bucket) from exc
        raise


def walk(base_fd: int, names: tuple[str, ...] | list[str]) -> int | None:
    """An fd of ``base/names...`` (caller closes), or None if any step is not a directory."""
    fd = base_fd
    try:
        for name in names:
            try:
                nxt = os.open(name, O_DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in _NOT_THERE:
                    return None
                raise
            if fd != base_fd:
                os.close(fd)
            fd = nxt
        owned = os.dup(base_fd) if fd == base_fd else fd
        fd = base_fd
        return owned
    finally:
        if fd != base_fd:
            os.close(fd)


def open_regular(parent_fd: int, name: str) -> tuple[int, os.stat_result] | None:
    """Open ``name`` for reading if it is a regular file (never through a symlink)."""
    try:
        fd = os.open(name, O_READ, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in _NOT_THERE or exc.errno in (errno.ENXIO, errno.EISDIR):
            return None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def open_object(bucket_fd: int, path: KeyPath) -> tuple[int, os.stat_result] | None:
    """Open the object's file; None if the key has no object.

    The object is ``leaf``, or ``%%o<leaf>`` while a directory ``leaf`` exists. Probing
    leaf, displaced, leaf again sees the object across one concurrent (un)displacement,
    each of which is a single rename.
    """
    parent = walk(bucket_fd, path.dirs)
    if parent is None:
        return None
    try:
        for name in (path.leaf, path.displaced, path.leaf):
            opened = open_regular(parent, name)
            if opened is not None:
                return opened
        return None
    finally:
        os.close(parent)


def ensure_dirs(bucket_fd: int, path: KeyPath, *, durable: bool) -> int | Conflict:
    """An fd of the object's parent directory (caller closes), creating what is missing.

    Returns a Conflict when a directory is needed where an object's file is: the caller
    takes that object's lock, calls :func:`displace`, and retries. Raises ParentGone.
    """
    fd = bucket_fd
    try:
        for index, name in enumerate(path.dirs):
            nxt = _open_or_make(fd, name, durable=durable)
            if nxt is None:
                st = lstat(fd, name)
                owner = path.owners[index]
                if st is not None and stat.S_ISREG(st.st_mode) and owner is not None:
                    return Conflict(index, owner)
                if st is None:
                    raise ParentGone()
                raise BackendError(f"Cannot store {path.key!r}: a path component in the "
                                   "tree is neither a directory nor an object.")
            if fd != bucket_fd:
                os.close(fd)
            fd = nxt
        owned = os.dup(bucket_fd) if fd == bucket_fd else fd
        fd = bucket_fd
        return owned
    finally:
        if fd != bucket_fd:
            os.close(fd)


def _open_or_make(parent_fd: int, name: str, *, durable: bool) -> int | None:
    """Open the directory ``name`` (creating it), or None if something else is there."""
    for _ in range(8):
        try:
            return os.open(name, O_DIR, dir_fd=parent_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                return None
            raise
        try:
            os.mkdir(name, dir_fd=parent_fd)
        except FileExistsError:
            continue
        except FileNotFoundError as exc:  # this directory itself was pruned meanwhile
            raise ParentGone() from exc
        if durable:
            fsync_dir(parent_fd)
    raise ParentGone()


def lstat(parent_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _regular(st: os.stat_result | None) -> bool:
    return st is not None and stat.S_ISREG(st.st_mode)


Attach = Callable[[str, "int | None"], None]


def place(parent_fd: int, path: KeyPath, src: Path, attach: Attach, *, durable: bool) -> str:
    """Rename the finished temp file ``src`` into place as the key's object.

    ``attach(target_name, current_ino)`` runs just before the rename (metadata that must
    be written first). Returns the name used. Raises ParentGone if the parent was pruned.
    """
    for _ in range(8):
        target, current, stale = _target(parent_fd, path)
        attach(target, current)
        try:
            os.rename(src, target, dst_dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                continue  # a directory of that name appeared meanwhile: displace
            if exc.errno == errno.ENOENT:
                raise ParentGone() from exc
            raise
        if stale:
            _unlink_regular(parent_fd, path.displaced)
        if durable:
            os.fsync(parent_fd)
        return target
    raise BackendError(f"Cannot store {path.key!r}: the tree keeps changing under it.")


def _target(parent_fd: int, path: KeyPath) -> tuple[str, int | None, bool]:
    """(name to rename to, inode of the current object, stale displaced file to drop)."""
    leaf = lstat(parent_fd, path.leaf)
    displaced = lstat(parent_fd, path.displaced)
    if leaf is not None and stat.S_ISDIR(leaf.st_mode):
        if displaced is not None and not _regular(displaced):
            raise BackendError(f"Cannot store {path.key!r}: its place in the tree is taken.")
        return path.displaced, displaced.st_ino if displaced is not None else None, False
    if _regular(leaf):
        assert leaf is not None
        return path.leaf, leaf.st_ino, _regular(displaced)
    current = displaced.st_ino if displaced is not None and _regular(displaced) else None
    return path.leaf, current, _regular(displaced)


def _unlink_regular(parent_fd: int, name: str) -> bool:
    if not _regular(lstat(parent_fd, name)):
        return False
    try:
        os.unlink(name, dir_fd=parent_fd)
    except FileNotFoundError:
        return False
    return True


def displace(bucket_fd: int, path: KeyPath, index: int, *, durable: bool) -> None:
    """Move the object file at ``dirs[index]`` to its ``%%o`` name (one atomic rename)."""
    parent = walk(bucket_fd, path.dirs[:index])
    if parent is None:
        return
    try:
        name = path.dirs[index]
        if _regular(lstat(parent, name)):
            os.rename(name, DISPLACED + name, src_dir_fd=parent, dst_dir_fd=parent)
            if durable:
                os.fsync(parent)
    finally:
        os.close(parent)


def remove(bucket_fd: int, path: KeyPath, *, durable: bool) -> bool:
    """Unlink the key's object file(s); False if there was none. Never removes others."""
    parent = walk(bucket_fd, path.dirs)
    if parent is None:
        return False
    try:
        removed = _unlink_regular(parent, path.leaf)
        removed = _unlink_regular(parent, path.displaced) or removed
        if removed and durable:
            os.fsync(parent)
        return removed
    finally:
        os.close(parent)


def prune(bucket_fd: int, path: KeyPath, depth: int, *, durable: bool) -> tuple[bool, bool]:
    """Remove ``dirs[depth - 1]`` if it is empty.

    Returns (removed, a displaced object of the same name is left to restore).
    """
    parent = walk(bucket_fd, path.dirs[: depth - 1])
    if parent is None:
        return False, False
    name = path.dirs[depth - 1]
    try:
        try:
            os.rmdir(name, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.ENOTDIR,
                             errno.EBUSY):
                return False, False
            raise
        if durable:
            os.fsync(parent)
        if path.owners[depth - 1] is None:
            return True, False  # a continuation directory: no object has its name
        return True, _regular(lstat(parent, DISPLACED + name))
    finally:
        os.close(parent)


def restore(bucket_fd: int, path: KeyPath, *, durable: bool) -> None:
    """Give a displaced object its plain name back once no directory takes it."""
    parent = walk(bucket_fd, path.dirs)
    if parent is None:
        return
    try:
        if lstat(parent, path.leaf) is None and _regular(lstat(parent, path.displaced)):
            try:
                os.rename(path.displaced, path.leaf, src_dir_fd=parent, dst_dir_fd=parent)
            except OSError as exc:
                if exc.errno not in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST,
                                     errno.ENOENT):
                    raise
                return
            if durable:
                os.fsync(parent)
    finally:
        os.close(parent)
