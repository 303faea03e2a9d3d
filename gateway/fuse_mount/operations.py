"""The FUSE operations (mfusepy's path-based API) of a mounted bucket.

libfuse runs every call on one of its worker threads, so calls block on S3 requests
without holding up the others. Open files live in :class:`OpenFiles` (one shared
:class:`OpenFile` per path, found through the handle, never by path: a handle's name may
have been unlinked or renamed). Every error leaves through ``errno_for`` (the one table).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, ParamSpec, TypeVar

from backends.errors import PreconditionFailed
from gateway.fuse_mount.attrs import NS, Attr, AttrCache, metadata_for
from gateway.fuse_mount.binding import mfusepy
from gateway.fuse_mount.errors import errno_for
from gateway.fuse_mount.handles import Handle, OpenFiles
from gateway.fuse_mount.kernel import set_read_ahead
from gateway.fuse_mount.listings import Listings
from gateway.fuse_mount.namespace import Namespace, PathError, dir_prefix, key_of, path_of
from gateway.fuse_mount.openfile import OpenFile, WriteConfig
from gateway.fuse_mount.reader import ReadAhead
from gateway.fuse_mount.settings import MountSettings
from gateway.fuse_mount.store import BucketClient

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2  # renameat2(2) flags
FUSE_CAP_WRITEBACK_CACHE = 1 << 16  # libfuse 3 fuse_common.h
KERNEL_READ_AHEAD_KIB = 1024  # the largest FUSE read request
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2  # utimensat(2) tv_nsec values


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


class BucketOperations(mfusepy.Operations):
    """A bucket as a directory tree; see docs/fuse-mount.md for the semantics."""

    use_ns = True

    def __init__(self, store: BucketClient, settings: MountSettings, *,
                 on_ready: Callable[[], None] | None = None) -> None:
        self._store = store
        self._settings = settings
        self._ns = Namespace(store, AttrCache(settings.attr_timeout),
                             Listings(settings.attr_timeout))
        self._on_ready = on_ready
        self._uid, self._gid = os.getuid(), os.getgid()
        self._mounted_at = int(time.time()) * NS
        self._write_cfg = WriteConfig(settings.block_size, settings.max_inflight,
                                      settings.staging_dir)
        self._uploads = ThreadPoolExecutor(settings.threads, thread_name_prefix="upload")
        self._fetches = ThreadPoolExecutor(settings.threads, thread_name_prefix="fetch")
        self._files = OpenFiles()
        self.destroyed = False
        self.unsaved: list[str] = []
        # The kernel sets the read-ahead window when it gets the reply to init: it is
        # widened at the first request after that.
        self._tune_read_ahead = settings.readahead > 0

    # -- lifecycle -------------------------------------------------------------------------
    def init_with_config(self, conn: Any, config: Any) -> None:
        """libfuse 3 is starting: set the connection options, then report ready."""
        if config is not None:
            # Calls on handles whose name was unlinked arrive with path None instead of
            # failing with ENOENT: handles are found by fh, never by path.
            config.nullpath_ok = 1
        if conn is not None and self._settings.writeback_cache:
            conn.want |= FUSE_CAP_WRITEBACK_CACHE & conn.capable
        log.info("mounted %s on %s", self._settings.bucket, self._settings.mountpoint)
        if self._on_ready is not None:
            self._on_ready()

    def destroy(self, path: str) -> None:
        """Unmount: complete every file still open, then stop the worker threads."""
        for f in self._files.drain():
            self._release_file(f)
        self._uploads.shutdown(wait=True, cancel_futures=True)
        self._fetches.shutdown(wait=False, cancel_futures=True)
        self.destroyed = True
        log.info("unmounted %s", self._settings.mountpoint)

    # -- attributes ------------------------------------------------------------------------
    @fuse_op
    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        if self._tune_read_ahead:
            self._tune_read_ahead = False
            set_read_ahead(self._settings.mountpoint, KERNEL_READ_AHEAD_KIB)
        f = self._open_file(path, fh)
        attr = self._attr_of_open(f) if f is not None else self._ns.require(_named(path))
        return self._stat(attr)

    @fuse_op
    def chmod(self, path: str | None, mode: int) -> int:
        self._set_attrs(path, metadata_for(mode=mode))
        return 0

    @fuse_op
    def chown(self, path: str | None, uid: int, gid: int) -> int:
        keep = {-1, 0xFFFFFFFF}
        self._set_attrs(path, metadata_for(uid=None if uid in keep else uid,
                                           gid=None if gid in keep else gid))
        return 0

    @fuse_op
    def utimens(self, path: str | None, times: tuple[int, int] | None = None) -> int:
        """touch, tar, rsync -t: the mtime is stored as user metadata (``mtime``); the
        atime is not kept."""
        mtime = times[1] if times else UTIME_NOW  # libfuse: 0 s + UTIME_* ns for those
        if mtime == UTIME_OMIT:
            return 0  # only the atime changes
        self._set_attrs(path, metadata_for(mtime_ns=time.time_ns() if mtime == UTIME_NOW
                                           else mtime))
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
    def opendir(self, path: str) -> int:
        if not self._ns.require(path).is_dir:
            raise PathError(errno.ENOTDIR, path)
        return self._files.open_dir(path)

    @fuse_op
    def releasedir(self, path: str | None, fh: int) -> int:
        self._files.release_dir(fh)
        return 0

    @fuse_op
    def readdir(self, path: str | None, fh: int) -> list[str]:
        path = self._files.dir_path(fh) or _named(path)
        names = [".", ".."] + [name for name, _ in self._ns.listdir(path)]
        prefix = dir_prefix(path)
        pending = [k[len(prefix):] for k in self._files.keys_under(prefix)
                   if "/" not in k[len(prefix):]]
        return names + sorted(set(pending) - set(names))

    @fuse_op
    def mkdir(self, path: str, mode: int) -> int:
        self._ns.mkdir(path)
        return 0

    @fuse_op
    def rmdir(self, path: str) -> int:
        if self._files.keys_under(dir_prefix(path)):
            raise PathError(errno.ENOTEMPTY, path)  # files being written here, not stored yet
        self._ns.rmdir(path)
        return 0

    # -- names -----------------------------------------------------------------------------
    @fuse_op
    def unlink(self, path: str) -> int:
        f = self._files.get(key_of(path))
        if f is None:
            self._ns.unlink(path)
            return 0
        f.detach()  # its handles keep working on a local copy; nothing stored at close
        self._files.detach(key_of(path))
        self._ns.delete(path)  # if it was stored already
        return 0

    @fuse_op
    def rename(self, old: str, new: str, flags: int = 0) -> int:
        if flags & RENAME_EXCHANGE:
            raise PathError(errno.EINVAL, new)
        if flags & RENAME_NOREPLACE and (self._files.get(key_of(new)) or self._ns.lookup(new)):
            raise PathError(errno.EEXIST, new)
        attr = self._open_attr_or_lookup(old)
        if attr.is_dir:
            if self._files.keys_under(dir_prefix(old)):
                raise PathError(errno.EBUSY, old)
            self._ns.rename_dir(old, new)
            return 0
        f = self._files.get(key_of(old))
        if f is None:
            self._replace_open(new, None)
            self._ns.rename_file(old, new)
            return 0
        with f.lock:  # no commit of f under its old name can slip in between
            f.commit()  # the object must exist (and be current) before it is copied
            self._replace_open(new, f)
            etag = self._ns.rename_file(old, new)
            self._files.rename(f, key_of(new))
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
        new = self._new_file(path, truncate=True, metadata=metadata_for(mode=mode))
        fh, _ = self._attach(path, new, writable=True, truncate=bool(flags & os.O_TRUNC))
        self._ns.created(path)
        return fh

    @fuse_op
    def open(self, path: str, flags: int) -> int:
        writable = flags & os.O_ACCMODE != os.O_RDONLY
        truncate = writable and bool(flags & os.O_TRUNC)
        current = self._files.get(key_of(path))
        # A file modified here is joined as it is; otherwise this open sees the newest
        # version (a fresh HeadObject), and a file open here on an older one stays with its
        # handles (as if replaced by a rename on a local file system).
        fresh = current is None or (current.version is not None and not current.dirty)
        candidate = self._new_file(path, truncate=truncate) if fresh else None
        return self._attach(path, candidate, writable=writable, truncate=truncate)[0]

    @fuse_op
    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        handle = self._handle(fh)
        f = handle.file
        for _ in range(3):
            version = f.version
            if version is None or handle.stream is None:
                break  # modified here: the file's own state answers
            try:
                return handle.stream.read(version, offset, size)
            except PreconditionFailed:
                if f.version is version:
                    raise  # replaced by another client: ESTALE
                # this mount stored, renamed or modified it meanwhile: read again
        return f.read(offset, size)

    @fuse_op
    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        handle = self._handle(fh)
        if not handle.writable:
            raise PathError(errno.EBADF, path or str(fh))
        return handle.file.write(offset, data)

    @fuse_op
    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        f = self._open_file(path, fh)
        if f is not None:
            f.truncate(length)
            return 0
        path = _named(path)
        if self._ns.require(path).is_dir:
            raise PathError(errno.EISDIR, path)
        f = self._new_file(path, truncate=False)
        try:
            f.truncate(length)
            f.commit()
        finally:
            f.release()
            self._ns.cache.invalidate(path)
        return 0

    @fuse_op
    def flush(self, path: str | None, fh: int) -> int:
        """close(): the close of the last writer uploads, and returns its errors."""
        handle = self._handle(fh)
        if self._files.last_close(fh) and handle.file.dirty:
            handle.file.commit()
            self._ns.cache.invalidate(path_of(handle.file.key))
        return 0

    @fuse_op
    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        self._handle(fh).file.commit()
        return 0

    @fuse_op
    def release(self, path: str | None, fh: int) -> int:
        handle, last = self._files.release(fh)
        if handle is None:
            return 0
        if handle.stream is not None:
            handle.stream.close()
        if last:
            self._release_file(handle.file)  # normally nothing left: flush committed
            self._files.forget(handle.file)
        return 0

    # -- helpers ---------------------------------------------------------------------------
    def _new_file(self, path: str, *, truncate: bool,
                  metadata: dict[str, str] | None = None) -> OpenFile:
        """A file for ``path``: empty if ``truncate`` (keeping the mode and owner of the
        object it replaces, as a local file system does), else the object's newest version."""
        existing = None if truncate else self._ns.head(path)
        if truncate and metadata is None and (attr := self._ns.lookup(path)) is not None:
            metadata = metadata_for(mode=attr.mode, uid=attr.uid, gid=attr.gid)
        return OpenFile(self._store, key_of(path), config=self._write_cfg, pool=self._uploads,
                        existing=existing, truncate=truncate, metadata=metadata)

    def _attach(self, path: str, candidate: OpenFile | None, *, writable: bool,
                truncate: bool) -> tuple[int, OpenFile]:
        """A new handle on ``path`` (joining the file open there, see OpenFiles.attach)."""
        stream = ReadAhead(self._store, block_size=self._settings.block_size,
                           window=self._settings.readahead_blocks, pool=self._fetches)
        while (opened := self._files.attach(key_of(path), candidate, writable=writable,
                                            stream=stream)) is None:
            candidate = self._new_file(path, truncate=truncate)  # it was closed meanwhile
        fh, f = opened
        if truncate and f is not candidate:
            try:
                f.truncate(0)
            except BaseException:
                self.release(path, fh)
                raise
        return fh, f

    def _release_file(self, f: OpenFile) -> None:
        """The last handle of ``f`` is gone: store what is left, or say loudly that we could
        not (the exit code of the mount reports it too)."""
        try:
            f.release()
        except Exception as exc:  # noqa: BLE001 - logged and reported by the exit code
            log.error("could not store %s: %r; its previous version stays", f.key, exc)
            self.unsaved.append(f.key)

    def _replace_open(self, new: str, keep: OpenFile | None) -> None:
        """A rename is about to overwrite ``new``: a file open there keeps a local copy."""
        replaced = self._files.get(key_of(new))
        if replaced is not None and replaced is not keep:
            replaced.detach()
            self._files.detach(key_of(new))

    def _handle(self, fh: int) -> Handle:
        handle = self._files.handle(fh)
        if handle is None:
            raise PathError(errno.EBADF, str(fh))
        return handle

    def _open_file(self, path: str | None, fh: int | None = None) -> OpenFile | None:
        """The open file of handle ``fh`` if given, else the one open under ``path``."""
        if fh:
            handle = self._files.handle(fh)
            if handle is not None:
                return handle.file
        return self._files.get(key_of(path)) if path is not None else None

    def _open_attr_or_lookup(self, path: str) -> Attr:
        f = self._open_file(path)
        return self._attr_of_open(f) if f is not None else self._ns.require(path)

    def _attr_of_open(self, f: OpenFile) -> Attr:
        meta = f.metadata
        mode = int(meta["mode"], 8) if "mode" in meta else None
        uid = int(meta["uid"]) if "uid" in meta else None
        gid = int(meta["gid"]) if "gid" in meta else None
        return Attr(False, f.size, f.mtime_ns, mode, uid, gid)

    def _set_attrs(self, path: str | None, values: dict[str, str]) -> None:
        if not values or path is None:  # no path: an unlinked file, never stored again
            return
        f = self._open_file(path)
        if f is not None:
            f.set_metadata(**values)
            if self._files.idle(f):  # no writer left to commit it (the file may be closing)
                f.commit()
        elif not self._ns.require(path).is_dir:  # directories: accepted, not stored
            self._ns.update_metadata(path, values)

    def _stat(self, attr: Attr) -> dict[str, Any]:
        if attr.is_dir and not attr.mtime_ns:
            attr = replace(attr, mtime_ns=self._mounted_at)
        return attr.to_stat(uid=self._uid, gid=self._gid, block_size=self._settings.block_size)


def _named(path: str | None) -> str:
    """``path``, which libfuse passes for every call that has no file handle."""
    if path is None:
        raise PathError(errno.ESTALE, "")
    return path
