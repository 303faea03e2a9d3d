"""The FUSE operations (mfusepy's path-based API) of a mounted bucket.

libfuse runs every call on one of its worker threads, so calls block on S3 requests
without holding up the others. ``_lock`` guards only the tables of open files and
handles and never covers I/O. Every error leaves through ``errno_for`` (the one table).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, ParamSpec, TypeVar

import mfusepy

from gateway.fuse_mount.attrs import Attr, AttrCache, metadata_for
from gateway.fuse_mount.errors import errno_for
from gateway.fuse_mount.namespace import Namespace, PathError, dir_prefix, key_of
from gateway.fuse_mount.openfile import OpenFile, WriteConfig
from gateway.fuse_mount.reader import ReadAhead
from gateway.fuse_mount.settings import MountSettings
from gateway.fuse_mount.store import ObjectStore

log = logging.getLogger(__name__)
P = ParamSpec("P")
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2  # renameat2(2) flags
R = TypeVar("R")


def fuse_op(method: Callable[P, R]) -> Callable[P, R]:
    """Turn any exception into ``FuseOSError(errno)``; log the unexpected ones."""
    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except mfusepy.FuseOSError:
            raise
        except Exception as exc:
            number = errno_for(exc)
            if not isinstance(exc, OSError) and number == errno.EIO:
                log.exception("%s%r failed", method.__name__, args[1:2])
            raise mfusepy.FuseOSError(number) from exc
    return wrapper


@dataclass(slots=True)
class _Handle:
    target: OpenFile | ReadAhead
    writable: bool


class BucketOperations(mfusepy.Operations):
    """A bucket as a directory tree; see docs/fuse-mount.md for the semantics."""

    use_ns = True

    def __init__(self, store: ObjectStore, settings: MountSettings, *,
                 on_ready: Callable[[], None] | None = None) -> None:
        self._store = store
        self._settings = settings
        self._ns = Namespace(store, AttrCache(settings.attr_timeout))
        self._on_ready = on_ready
        self._uid, self._gid = os.getuid(), os.getgid()
        self._mounted_at = float(int(time.time()))
        self._write_cfg = WriteConfig(settings.block_size, settings.max_inflight,
                                      settings.staging_dir)
        self._uploads = ThreadPoolExecutor(settings.threads, thread_name_prefix="upload")
        self._fetches = ThreadPoolExecutor(settings.threads, thread_name_prefix="fetch")
        self._lock = threading.Lock()
        self._files: dict[str, OpenFile] = {}
        self._handles: dict[int, _Handle] = {}
        self._next_fh = 1
        self.destroyed = False
        self.unsaved: list[str] = []

    # -- lifecycle -------------------------------------------------------------------------
    def init(self, path: str) -> None:
        log.info("mounted %s on %s", self._settings.bucket, self._settings.mountpoint)
        if self._on_ready is not None:
            self._on_ready()

    def destroy(self, path: str) -> None:
        """Unmount: complete every file still open, then stop the worker threads."""
        with self._lock:
            files = list(self._files.values())
            self._files.clear()
            self._handles.clear()
        for f in files:
            try:
                f.release()
            except Exception as exc:  # noqa: BLE001 - logged and reported by the exit code
                log.error("could not store %s at unmount: %r", f.key, exc)
                self.unsaved.append(f.key)
        self._uploads.shutdown(wait=True, cancel_futures=True)
        self._fetches.shutdown(wait=False, cancel_futures=True)
        self.destroyed = True
        log.info("unmounted %s", self._settings.mountpoint)

    # -- attributes ------------------------------------------------------------------------
    @fuse_op
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        f = self._open_file(path)
        attr = self._attr_of_open(f) if f is not None else self._ns.require(path)
        return self._stat(attr)

    @fuse_op
    def chmod(self, path: str, mode: int) -> int:
        self._set_attrs(path, metadata_for(mode=mode))
        return 0

    @fuse_op
    def chown(self, path: str, uid: int, gid: int) -> int:
        keep = {-1, 0xFFFFFFFF}
        self._set_attrs(path, metadata_for(uid=None if uid in keep else uid,
                                           gid=None if gid in keep else gid))
        return 0

    @fuse_op
    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        f = self._open_file(path)
        if f is not None:  # closed files keep their upload time (see docs)
            mtime = times[1] / 1e9 if times else time.time()
            f.set_metadata(**metadata_for(mtime=mtime))
        return 0

    @fuse_op
    def statfs(self, path: str) -> dict[str, int]:
        block = self._settings.block_size
        blocks = (1 << 50) // block
        return {"f_bsize": block, "f_frsize": block, "f_blocks": blocks, "f_bfree": blocks,
                "f_bavail": blocks, "f_files": 1 << 32, "f_ffree": 1 << 32,
                "f_favail": 1 << 32, "f_namemax": 1024}

    # -- directories -----------------------------------------------------------------------
    @fuse_op
    def readdir(self, path: str, fh: int) -> list[str]:
        if not self._ns.require(path).is_dir:
            raise PathError(errno.ENOTDIR, path)
        names = [".", ".."] + [name for name, _ in self._ns.listdir(path)]
        prefix = dir_prefix(path)
        with self._lock:
            pending = [k[len(prefix):] for k in self._files
                       if k.startswith(prefix) and "/" not in k[len(prefix):]]
        return names + sorted(set(pending) - set(names))

    @fuse_op
    def mkdir(self, path: str, mode: int) -> int:
        self._ns.mkdir(path)
        return 0

    @fuse_op
    def rmdir(self, path: str) -> int:
        self._ns.rmdir(path)
        return 0

    # -- names -----------------------------------------------------------------------------
    @fuse_op
    def unlink(self, path: str) -> int:
        with self._lock:
            f = self._files.pop(key_of(path), None)
        if f is not None:
            f.unlinked = True  # its handles stay usable; nothing is stored at close
            self._ns.cache.invalidate(path)
            if self._ns.lookup(path) is None:
                return 0
        self._ns.unlink(path)
        return 0

    @fuse_op
    def rename(self, old: str, new: str, flags: int = 0) -> int:
        if flags & RENAME_EXCHANGE:
            raise PathError(errno.EINVAL, new)
        if flags & RENAME_NOREPLACE and (self._open_file(new) or self._ns.lookup(new)):
            raise PathError(errno.EEXIST, new)
        attr = self._open_attr_or_lookup(old)
        if attr.is_dir:
            prefix = dir_prefix(old)
            with self._lock:
                if any(k.startswith(prefix) for k in self._files):
                    raise PathError(errno.EBUSY, old)
            self._ns.rename_dir(old, new)
            return 0
        f = self._open_file(old)
        if f is not None:
            f.commit()  # the object must exist (and be current) before it is copied
        with self._lock:
            replaced = self._files.pop(key_of(new), None)
        if replaced is not None:
            replaced.unlinked = True
        etag = self._ns.rename_file(old, new)
        if f is not None:
            with self._lock:
                if self._files.get(key_of(old)) is f:
                    del self._files[key_of(old)]
                    self._files[key_of(new)] = f
            f.rebind(key_of(new), etag)
        return 0

    def symlink(self, target: str, source: str) -> int:
        raise mfusepy.FuseOSError(errno.ENOTSUP)

    def link(self, target: str, source: str) -> int:
        raise mfusepy.FuseOSError(errno.ENOTSUP)

    def mknod(self, path: str, mode: int, dev: int) -> int:
        raise mfusepy.FuseOSError(errno.ENOTSUP)

    # -- files -----------------------------------------------------------------------------
    @fuse_op
    def create(self, path: str, mode: int, flags: int) -> int:
        key = key_of(path)
        meta = metadata_for(mode=mode)
        f = OpenFile(self._store, key, config=self._write_cfg, pool=self._uploads,
                     existing=None, truncate=True, metadata=meta)
        with self._lock:
            current = self._files.get(key)
            if current is not None:
                f = current
            else:
                self._files[key] = f
        if current is not None and flags & os.O_TRUNC:
            f.truncate(0)
        self._ns.cache.invalidate(path)
        return self._new_handle(f, writable=True)

    @fuse_op
    def open(self, path: str, flags: int) -> int:
        key = key_of(path)
        writable = flags & os.O_ACCMODE != os.O_RDONLY
        f = self._open_file(path)
        if f is None and writable:
            existing = None if flags & os.O_TRUNC else self._ns.head(path)
            new = OpenFile(self._store, key, config=self._write_cfg, pool=self._uploads,
                           existing=existing, truncate=existing is None)
            with self._lock:
                f = self._files.setdefault(key, new)
            if f is new:
                return self._new_handle(f, writable=True)
        if f is not None:
            if writable and flags & os.O_TRUNC:
                f.truncate(0)
            return self._new_handle(f, writable=writable)
        reader = ReadAhead(self._store, self._ns.head(path), block_size=self._settings.block_size,
                           window=self._settings.readahead_blocks, pool=self._fetches)
        return self._new_handle(reader, writable=False)

    @fuse_op
    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return self._handle(fh).target.read(offset, size)

    @fuse_op
    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        target = self._handle(fh).target
        if not isinstance(target, OpenFile):
            raise PathError(errno.EBADF, path)
        return target.write(offset, data)

    @fuse_op
    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        f = self._open_file(path)
        if f is not None:
            f.truncate(length)
            return 0
        if self._ns.require(path).is_dir:
            raise PathError(errno.EISDIR, path)
        f = OpenFile(self._store, key_of(path), config=self._write_cfg, pool=self._uploads,
                     existing=self._ns.head(path), truncate=False)
        try:
            f.truncate(length)
            f.commit()
        finally:
            f.release()
            self._ns.cache.invalidate(path)
        return 0

    @fuse_op
    def flush(self, path: str, fh: int) -> int:
        handle = self._handle(fh)
        if handle.writable and isinstance(handle.target, OpenFile):
            handle.target.commit()  # close() reports upload errors through here
            self._ns.cache.invalidate(path)
        return 0

    @fuse_op
    def fsync(self, path: str, datasync: int, fh: int) -> int:
        target = self._handle(fh).target
        if isinstance(target, OpenFile):
            target.commit()
        return 0

    @fuse_op
    def release(self, path: str, fh: int) -> int:
        with self._lock:
            handle = self._handles.pop(fh, None)
            target = handle.target if handle is not None else None
            last = False
            if isinstance(target, OpenFile):
                target.handles -= 1
                last = target.handles == 0
                if last and self._files.get(target.key) is target:
                    del self._files[target.key]
        if isinstance(target, ReadAhead):
            target.close()
        elif isinstance(target, OpenFile) and last:
            target.release()  # normally a no-op: flush already committed
        return 0

    # -- helpers ---------------------------------------------------------------------------
    def _new_handle(self, target: OpenFile | ReadAhead, *, writable: bool) -> int:
        with self._lock:
            fh = self._next_fh
            self._next_fh += 1
            self._handles[fh] = _Handle(target, writable)
            if isinstance(target, OpenFile):
                target.handles += 1
        return fh

    def _handle(self, fh: int) -> _Handle:
        with self._lock:
            handle = self._handles.get(fh)
        if handle is None:
            raise PathError(errno.EBADF, str(fh))
        return handle

    def _open_file(self, path: str) -> OpenFile | None:
        with self._lock:
            return self._files.get(key_of(path))

    def _open_attr_or_lookup(self, path: str) -> Attr:
        f = self._open_file(path)
        return self._attr_of_open(f) if f is not None else self._ns.require(path)

    def _attr_of_open(self, f: OpenFile) -> Attr:
        meta = f.metadata
        mode = int(meta["mode"], 8) if "mode" in meta else None
        uid = int(meta["uid"]) if "uid" in meta else None
        gid = int(meta["gid"]) if "gid" in meta else None
        return Attr(False, f.size, f.mtime, mode, uid, gid)

    def _set_attrs(self, path: str, values: dict[str, str]) -> None:
        if not values:
            return
        f = self._open_file(path)
        if f is not None:
            f.set_metadata(**values)
        elif not self._ns.require(path).is_dir:  # directories: accepted, not stored
            self._ns.update_metadata(path, values)

    def _stat(self, attr: Attr) -> dict[str, Any]:
        if attr.is_dir and not attr.mtime:
            attr = replace(attr, mtime=self._mounted_at)
        st = attr.to_stat(uid=self._uid, gid=self._gid, block_size=self._settings.block_size)
        for name in ("st_mtime", "st_ctime", "st_atime"):
            st[name] = int(st[name] * 1e9)
        return st
