"""Run one mount in the foreground until it is unmounted (fusermount3 -u, SIGTERM, SIGINT)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from gateway.client.failures import ClientFailure
from gateway.fuse_mount.binding import BindingUnavailable, mfusepy, require_libfuse3
from gateway.fuse_mount.fuseop import fuse_op
from gateway.fuse_mount.operations import BucketOperations
from gateway.fuse_mount.reader import Chunk
from gateway.fuse_mount.routing import OwnerRouter
from gateway.fuse_mount.settings import MountSettings
from gateway.fuse_mount.signals import flush_on_stop
from gateway.fuse_mount.store import BucketClient
from gateway.fuse_mount.stream import StreamChunk


class MountFailed(RuntimeError):
    """libfuse could not mount (or run) the file system."""


class UnsavedFiles(ClientFailure):
    """Files still open at unmount could not be stored (their previous versions stay):
    exit status 1."""


class _FUSE(mfusepy.FUSE):
    """mfusepy's FUSE, passing on what it drops for libfuse 3: renameat2 flags (so that
    they are honoured) and the handle of ftruncate and utimens (whose path is None with
    nullpath_ok: the kernel's writeback cache sends the mtime of written files that way);
    setting ``keep_cache`` and ``direct_io`` in the answer to open and create; copying read
    blocks straight into the kernel's buffer."""

    def open(self, path: bytes, fip: Any) -> int:
        result = int(super().open(path, fip))
        self._set_open_flags(fip.contents)
        return result

    def create(self, path: bytes, mode: int, fip: Any) -> int:
        result = int(super().create(path, mode, fip))
        self._set_open_flags(fip.contents)
        return result

    def _set_open_flags(self, fi: Any) -> None:
        keep_cache, direct_io = self.operations.open_flags(fi.fh)
        fi.keep_cache = int(keep_cache)
        fi.direct_io = int(direct_io)

    def write(self, path: bytes | None, buf: Any, size: int, offset: int, fip: Any) -> int:
        # The bytes stay in libfuse's buffer: a view of them, valid during this call only
        # (every write path copies what it keeps), instead of a bytes copy.
        data = memoryview((ctypes.c_char * size).from_address(
            ctypes.addressof(buf.contents))).cast("B") if size else memoryview(b"")
        return int(self.operations.write(None if path is None else path.decode(
            self.encoding, self.errors), data, offset, fip.contents.fh))

    def read(self, path: bytes | None, buf: Any, size: int, offset: int, fip: Any) -> int:
        data = self.operations.read(None if path is None else path.decode(
            self.encoding, self.errors), size, offset, fip.contents.fh)
        if not isinstance(data, bytes):
            return self._copy(data, buf, size)
        if len(data) > size:
            raise ValueError(f"read returned {len(data)} bytes, more than {size}")
        ctypes.memmove(buf, data, len(data))
        return len(data)

    @fuse_op
    def _copy(self, chunk: Chunk | StreamChunk, buf: Any, size: int) -> int:
        """Copy a read's bytes into the kernel's buffer (a stream chunk reads them from
        its socket here: its errors are a read's errors)."""
        return chunk.copy_to(buf, size)

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        return int(self.operations.rename(old.decode(self.encoding, self.errors),
                                          new.decode(self.encoding, self.errors), flags))

    def utimens_fuse_3(self, path: bytes | None, buf: Any, fip: Any) -> int:
        times = None
        if buf:
            times = (mfusepy.time_of_timespec(buf.contents.actime, use_ns=True),
                     mfusepy.time_of_timespec(buf.contents.modtime, use_ns=True))
        fh = fip.contents.fh if fip else None
        name = None if path is None else path.decode(self.encoding, self.errors)
        return int(self.operations.utimens(name, times, fh))

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        fh = fip.contents.fh if fip else None
        name = None if path is None else path.decode(self.encoding, self.errors)
        return int(self.operations.truncate(name, length, fh))


def build_store(settings: MountSettings, *, max_attempts: int | None = None,
                router: OwnerRouter | None = None) -> BucketClient:
    """The mount's S3 client; ``router`` sends its object requests to their owners in a
    cluster (:func:`gateway.fuse_mount.routing.owner_router`), else every request goes to
    the endpoint."""
    return BucketClient(settings.endpoint, settings.bucket, settings.credentials,
                        region=settings.region, max_attempts=max_attempts or settings.max_attempts,
                        pool_size=4 * settings.threads, ca_bundle=settings.ca_bundle,
                        router=router)


def run_mount(settings: MountSettings, *, router: OwnerRouter | None = None,
              on_ready: Callable[[], None] | None = None) -> None:
    """Mount and serve requests; returns after a clean unmount. ``router``: object
    requests go to their key's owner (its ring read again in the background meanwhile).

    SIGTERM, SIGINT and SIGHUP first make the kernel write its cached writes to the mount
    (:mod:`signals`); then the request loop stops, the kernel mount is detached, and
    ``destroy`` completes the uploads of files still open.
    """
    try:
        require_libfuse3()
    except BindingUnavailable as exc:
        raise MountFailed(str(exc)) from exc
    try:
        store = build_store(settings, router=router)
    except ValueError as exc:
        raise MountFailed(str(exc)) from exc
    operations = BucketOperations(store, settings, on_ready=on_ready)
    timeout = settings.attr_timeout
    if router is not None:
        router.start()
    try:
        with flush_on_stop(settings.mountpoint, operations.open_names, operations.stop_loop):
            _FUSE(operations, str(settings.mountpoint), foreground=True, nothreads=False,
                  fsname=f"squall:{settings.bucket}", subtype="squall",
                  attr_timeout=timeout, entry_timeout=timeout, negative_timeout=0,
                  hard_remove=True)
    except RuntimeError as exc:
        # A loop stopped by SIGTERM/SIGINT also returns non-zero: that is a clean unmount
        # when destroy() ran (every open file was completed).
        if not operations.destroyed:
            raise MountFailed(f"libfuse failed with status {exc}") from exc
    finally:
        if router is not None:
            router.stop()
    if operations.unsaved:
        raise UnsavedFiles(f"could not store {len(operations.unsaved)} file(s) open at "
                           f"unmount: {', '.join(operations.unsaved)}")
