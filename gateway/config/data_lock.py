"""One gateway per data directory: ``squall serve`` holds ``<data-dir>/squall.lock``.

The lock (``flock``, exclusive) is taken once the start-up checks have passed (they write
nothing), before anything in the directory is changed, and held until the process ends; the kernel drops it when the process dies, even
by ``kill -9``, so nothing stale is ever left to clean. A second gateway on the same
directory stops with one line naming it and the process that holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

LOCK_NAME = "squall.lock"


def hold_data_dir(data_dir: Path) -> int:
    """Make ``data_dir`` if need be and lock it; the open descriptor that holds the lock
    (keep it open as long as the gateway runs). ValueError (one line) when another
    process holds it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise ValueError(f"data directory {data_dir} is in use by another gateway{holder}: "
                         "stop it, or give this one its own --data-dir") from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _holder(fd: int) -> str:
    """`` (pid N)`` as the holder wrote it, or nothing when it cannot be read."""
    with contextlib.suppress(OSError, ValueError):
        return f" (pid {int(os.pread(fd, 32, 0).decode().strip())})"
    return ""
