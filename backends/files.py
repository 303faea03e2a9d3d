"""Small blocking file helpers: atomic small-file writes, directory fsync, data copies."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import shutil
import struct
from collections.abc import Sequence
from pathlib import Path

O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
O_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_MODE = 0o666  # narrowed by the process umask, like any tool's new files

# copy_file_range refusals after which a plain read/write copy is used instead.
_NO_OFFLOAD = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF,
               errno.ETXTBSY, errno.EPERM}


def temp_name(prefix: str = "tmp") -> str:
    return f"{prefix}-{secrets.token_hex(10)}"


def fsync_dir(path_or_fd: Path | int) -> None:
    """Make a directory's entries (creates, renames, unlinks) durable."""
    if isinstance(path_or_fd, int):
        os.fsync(path_or_fd)
        return
    fd = os.open(path_or_fd, O_DIR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def device_of(path: Path) -> int:
    """The ``st_dev`` of the file system ``path`` is (or, not made yet, will be) on."""
    for candidate in (path, *path.resolve().parents):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            return os.stat(candidate).st_dev
    return os.stat("/").st_dev


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset`` of ``fd``."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


#: pieces written by one pwritev at most (within every system's IOV_MAX)
_IOV_MAX = 512


def pwritev_all(fd: int, pieces: Sequence[bytes | bytearray | memoryview], offset: int) -> None:
    """Write ``pieces`` one after the other at ``offset`` of ``fd`` (one system call per
    ``_IOV_MAX`` pieces, no joined copy)."""
    for first in range(0, len(pieces), _IOV_MAX):
        batch = pieces[first:first + _IOV_MAX]
        written = os.pwritev(fd, batch, offset)
        for piece in batch:  # rare: a short write (a signal, a full disk); the rest as is
            size = len(piece)
            if written < size:
                pwrite_all(fd, memoryview(piece)[max(written, 0):], offset + max(written, 0))
            offset += size
            written -= size


def write_atomic(path: Path, data: bytes, *, tmp_dir: Path, durable: bool) -> None:
    """Write a small file as temp + fsync + rename (+ directory fsync)."""
    tmp = tmp_dir / temp_name()
    fd = os.open(tmp, O_CREATE, FILE_MODE)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def read_small(path: Path, limit: int = 1 << 20) -> bytes:
    """A small file's bytes (records); refuses to follow a symlink."""
    fd = os.open(path, O_READ)
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def remove_tree(path: Path) -> None:
    """Remove a directory tree of our own hidden area; a missing one is fine."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


#: ioctl(2) FICLONERANGE, struct file_clone_range {s64 src_fd; u64 src_offset, src_length,
#: dest_offset}
_FICLONERANGE = 0x4020940D
_CLONE_RANGE = struct.Struct("=qQQQ")


def clone_range(src_fd: int, dst_fd: int, count: int, *, src_offset: int,
                dst_offset: int) -> bool:
    """Share ``count`` bytes of ``src_fd`` from ``src_offset`` with ``dst_fd`` at
    ``dst_offset`` (a reflink: no bytes copied or written); False where the file system
    cannot (most, and ranges not aligned to its blocks), nothing done then."""
    try:
        fcntl.ioctl(dst_fd, _FICLONERANGE,
                    _CLONE_RANGE.pack(src_fd, src_offset, count, dst_offset))
    except OSError as exc:
        if exc.errno not in _NO_OFFLOAD and exc.errno != errno.ENOTTY:
            raise
        return False
    return True


def copy_data(src_fd: int, dst_fd: int, count: int, *, dst_offset: int,
              chunk_size: int, src_offset: int = 0) -> None:
    """Copy ``count`` bytes from ``src_offset`` in ``src_fd`` to ``dst_offset`` in ``dst_fd``.

    Uses copy_file_range (the kernel or the file system moves the bytes, reflinking where
    it can); falls back to a chunked pread/pwrite copy where the file system refuses.
    Raises OSError(EIO) when the source is shorter than ``count``.
    """
    done = 0
    while done < count:
        try:
            copied = os.copy_file_range(src_fd, dst_fd, count - done, src_offset + done,
                                        dst_offset + done)
        except OSError as exc:
            if exc.errno not in _NO_OFFLOAD:
                raise
            _copy_chunked(src_fd, dst_fd, src_offset + done, count - done, dst_offset + done,
                          chunk_size)
            return
        if copied == 0:
            raise OSError(errno.EIO, "source shorter than expected")
        done += copied


def _copy_chunked(src_fd: int, dst_fd: int, src_offset: int, count: int, dst_offset: int,
                  chunk_size: int) -> None:
    done = 0
    while done < count:
        data = os.pread(src_fd, min(chunk_size, count - done), src_offset + done)
        if not data:
            raise OSError(errno.EIO, "source shorter than expected")
        pwrite_all(dst_fd, data, dst_offset + done)
        done += len(data)
