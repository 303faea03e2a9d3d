"""The FUSE operations (mfusepy's path-based API) of a mounted bucket.

libfuse runs every call on one of its worker threads, so calls block on S3 requests
without holding up the others. Open files live in :class:`OpenFiles` (one shared
:class:`OpenFile` per path, found through the handle, never by path: a handle's name may
have been unlinked or renamed), opened and let go by :class:`FileOpener`. Every error
leaves through ``errno_for`` (the one table).
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from backends.core.errors import PreconditionFailed
from gateway.fuse_mount.attrs import NS, Attr, AttrCache, metadata_for
from gateway.fuse_mount.binding import current_fuse, exit_loop, mfusepy
from gateway.fuse_mount.fuseop import fuse_op
from gateway.fuse_mount.kernel import set_read_ahead
from gateway.fuse_mount.kernel_view import KernelView
from gateway.fuse_mount.listings import Listings
from gateway.fuse_mount.namespace import Namespace, PathError, dir_prefix, key_of, path_of
from gateway.fuse_mount.openfile import OpenFile, Written
from gateway.fuse_mount.opening import FileOpener
from gateway.fuse_mount.reader import Chunk
from gateway.fuse_mount.settings import MountSettings
from gateway.fuse_mount.shared import SharedFile, being_written
from gateway.fuse_mount.store import BucketClient
from gateway.fuse_mount.stream import StreamChunk

log = logging.getLogger(__name__)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2  # renameat2(2) flags
FUSE_CAP_WRITEBACK_CACHE = 1 << 16  # libfuse 3 fuse_common.h
KERNEL_READ_AHEAD_KIB = 1024  # the largest FUSE read request
KERNEL_MAX_BACKGROUND = 4  # FUSE requests the kernel sends without waiting (writeback, read-ahead)
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2  # utimensat(2) tv_nsec values


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
        self._opener = FileOpener(store, settings, self._ns)
        self._files = self._opener.files
        self._view = KernelView(settings.attr_timeout, writeback=settings.writeback_cache)
        self.destroyed = False
        self._fuse: int | None = None  # libfuse's struct fuse, known from init on
        # The kernel sets the read-ahead window when it gets the reply to init: it is
        # widened at the first request after that.
        self._tune_read_ahead = settings.readahead > 0

    # -- lifecycle -------------------------------------------------------------------------
    def init_with_config(self, conn: Any, config: Any) -> None:
        """libfuse 3 is starting: set the connection options, then report ready."""
        self._fuse = current_fuse()
        if config is not None:
            # Calls on handles whose name was unlinked arrive with path None instead of
            # failing with ENOENT: handles are found by fh, never by path.
            config.nullpath_ok = 1
        if conn is not None and self._settings.writeback_cache:
            conn.want |= FUSE_CAP_WRITEBACK_CACHE & conn.capable
        if conn is not None:
            log.info("kernel writeback cache: %s",
                     "on" if conn.want & FUSE_CAP_WRITEBACK_CACHE else "off")
            # Few requests in flight: the kernel's writeback sends 1 MiB writes of a file
            # in order, and they reach OpenFile nearly in order (with 8 or more, some
            # arrive tens of MiB late and the file must be staged).
            conn.max_background = KERNEL_MAX_BACKGROUND
            conn.congestion_threshold = KERNEL_MAX_BACKGROUND - 1
        log.info("mounted %s on %s", self._settings.bucket, self._settings.mountpoint)
        if self._on_ready is not None:
            self._on_ready()

    def open_names(self) -> list[str]:
        """Keys of the files open in this mount (their paths under the mountpoint)."""
        return self._files.keys_under("")

    def stop_loop(self) -> bool:
        """Stop libfuse's request loop (unmount follows); False before the mount is up."""
        if self._fuse is None or self.destroyed:
            return False
        exit_loop(self._fuse)
        return True

    @property
    def unsaved(self) -> list[str]:
        """Keys of files that could not be stored when their last handle went."""
        return self._opener.unsaved

    def destroy(self, path: str) -> None:
        """Unmount: complete every file still open, then stop the worker threads."""
        self._opener.shutdown()
        self.destroyed = True
        log.info("unmounted %s", self._settings.mountpoint)

    # -- attributes ------------------------------------------------------------------------
    @fuse_op
    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        if self._tune_read_ahead:
            self._tune_read_ahead = False
            set_read_ahead(self._settings.mountpoint, KERNEL_READ_AHEAD_KIB)
        f = self._opener.open_file(path, fh)
        if f is not None:
            return self._stat(self._attr_of_open(f))
        path = _named(path)
        try:
            attr = self._ns.require(path)
        except PathError as exc:
            if exc.errno != errno.ENOENT or not self._opener.shared(path) or not being_written(
                    self._store, key_of(path)):
                raise
            attr = Attr(False, 0, time.time_ns())  # written by other mounts, not stored yet
        if not attr.is_dir and not self._view.answer(path, attr.size, attr.etag):
            # The kernel's inode holds another size: it drops it and looks up again.
            raise PathError(errno.ESTALE, path)
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
    def utimens(self, path: str | None, times: tuple[int, int] | None = None,
                fh: int | None = None) -> int:
        """touch, tar, rsync -t: the mtime is stored as user metadata (``mtime``); the
        atime is not kept."""
        mtime = times[1] if times else UTIME_NOW  # libfuse: 0 s + UTIME_* ns for those
        if mtime == UTIME_OMIT:
            return 0  # only the atime changes
        self._set_attrs(path, metadata_for(mtime_ns=time.time_ns() if mtime == UTIME_NOW
                                           else mtime), fh)
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
        self._view.removed(path)
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
            self._opener.replace_open(new, None)
            self._ns.rename_file(old, new)
            self._view.renamed(old, new)
            return 0
        with f.lock:  # no commit of f under its old name can slip in between
            f.commit()  # the object must exist (and be current) before it is copied
            self._opener.replace_open(new, f)
            etag = self._ns.rename_file(old, new)
            self._files.rename(f, key_of(new))
            f.rebind(key_of(new), etag)
        self._view.renamed(old, new)
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
        new = self._opener.new_file(path, truncate=True, metadata=metadata_for(mode=mode),
                                    writable=True)
        fh, f = self._opener.attach(path, new, writable=True, truncate=bool(flags & os.O_TRUNC))
        if isinstance(f, SharedFile):
            self._opener.handle(fh).direct_io = True
            if f is new:
                self._opener.start_shared(fh, f)
        elif self._opener.direct(path):
            self._opener.handle(fh).direct_io = True
        self._ns.created(path)
        self._view.removed(path)  # a new inode, with nothing cached
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
        candidate = (self._opener.new_file(path, truncate=truncate, writable=writable) if fresh
                     else None)
        version = candidate.version if candidate is not None else None
        if current is None and version is not None and self._view.stale_at_open(
                path, version.size, version.etag):
            # The kernel's inode (not open anywhere) holds another size: the kernel retries
            # the open after a lookup that replaces it (see kernel_view).
            raise PathError(errno.ESTALE, path)
        fh, f = self._opener.attach(path, candidate, writable=writable, truncate=truncate)
        handle = self._opener.handle(fh)
        if isinstance(f, SharedFile):
            handle.direct_io = True  # whole pages would overwrite the other mounts' bytes
            if f is candidate:
                self._opener.start_shared(fh, f)
        elif f is not candidate:  # joined a file open here: the kernel's pages are its own
            handle.keep_cache = True
        else:
            etag = version.etag if version is not None else None
            handle.keep_cache = self._view.keep_cache(path, etag)
            self._view.opened(path, etag)
        if self._opener.direct(path):
            handle.direct_io = True  # reads and writes go to the mount as they are asked
        return fh

    def open_flags(self, fh: int) -> tuple[bool, bool]:
        """``(keep_cache, direct_io)`` of the answer to the open that made ``fh``."""
        handle = self._files.handle(fh)
        if handle is None:
            return False, False
        return handle.keep_cache, handle.direct_io

    @fuse_op
    def read(self, path: str | None, size: int, offset: int, fh: int
             ) -> bytes | Chunk | StreamChunk:
        handle = self._opener.handle(fh)
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
    def write(self, path: str | None, data: Written, offset: int, fh: int) -> int:
        handle = self._opener.handle(fh)
        if not handle.writable:
            raise PathError(errno.EBADF, path or str(fh))
        if handle.closing:
            self._files.writing(fh)
        return handle.file.write(offset, data)

    @fuse_op
    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        f = self._opener.open_file(path, fh)
        if f is not None:
            f.truncate(length)
            return 0
        path = _named(path)
        if self._ns.require(path).is_dir:
            raise PathError(errno.EISDIR, path)
        f = self._opener.new_file(path, truncate=False)
        try:
            f.truncate(length)
            self._commit(f)
        finally:
            f.release()
            self._ns.cache.invalidate(path)
        return 0

    @fuse_op
    def flush(self, path: str | None, fh: int) -> int:
        """close(): the close of the last writer uploads, and returns its errors."""
        handle = self._opener.handle(fh)
        # A shared file leaves its upload at the last close here, written or not: the last
        # mount to leave completes it before its close returns.
        if self._files.last_close(fh) and (handle.file.dirty
                                           or isinstance(handle.file, SharedFile)):
            self._commit(handle.file)
            self._ns.cache.invalidate(path_of(handle.file.key))
        return 0

    @fuse_op
    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        self._commit(self._opener.handle(fh).file, final=False)
        return 0

    @fuse_op
    def release(self, path: str | None, fh: int) -> int:
        self._opener.release(fh)
        return 0

    # -- helpers ---------------------------------------------------------------------------
    def _commit(self, f: OpenFile, *, final: bool = True) -> None:
        """Store ``f``; the kernel's size and pages of it are now that object's."""
        f.commit(final=final)
        if not f.unlinked:
            self._view.committed(path_of(f.key), f.size, f.etag)

    def _open_attr_or_lookup(self, path: str) -> Attr:
        f = self._opener.open_file(path)
        return self._attr_of_open(f) if f is not None else self._ns.require(path)

    def _attr_of_open(self, f: OpenFile) -> Attr:
        meta = f.metadata
        mode = int(meta["mode"], 8) if "mode" in meta else None
        uid = int(meta["uid"]) if "uid" in meta else None
        gid = int(meta["gid"]) if "gid" in meta else None
        return Attr(False, f.size, f.mtime_ns, mode, uid, gid)

    def _set_attrs(self, path: str | None, values: dict[str, str],
                   fh: int | None = None) -> None:
        if not values:
            return
        f = self._opener.open_file(path, fh)
        if f is not None:
            if f.unlinked:
                return  # never stored again
            f.set_metadata(**values)
            if self._files.idle(f):  # no writer left to commit it (the file may be closing)
                f.commit()
        elif path is None:
            return  # an unlinked file, not open here any more
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
