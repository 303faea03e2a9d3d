"""Stop signals (SIGTERM, SIGINT, SIGHUP) that first empty the kernel's write cache.

With the kernel's writeback cache, bytes written by programs may still sit in the kernel's
page cache when the mount is told to stop. libfuse's own signal handler stops the request
loop at once, and the kernel drops those pages with the connection. So while the loop
runs, the stop signals are blocked in every thread and a watcher thread takes them: it
makes the kernel write its dirty pages to the mount (``syncfs`` of the mountpoint, served
by the running loop) and ``fsync``s every file open in the mount (the kernel waits for its
writes still in flight, which ``syncfs`` does not always do, and the mount commits it),
then stops the loop the way libfuse's handler does (``fuse_exit``, and a wake-up signal
for the loop's main thread). ``destroy`` then completes the files.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
WAKE_SIGNAL = signal.SIGUSR1  # interrupts the loop's wait (a no-op handler)


def syncfs(path: Path) -> None:
    """syncfs(2) of the file system mounted on ``path``: the kernel writes back its dirty
    pages (and waits for them)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.syncfs(fd) != 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number), str(path))
    finally:
        os.close(fd)


def fsync_files(mountpoint: Path, names: Iterable[str]) -> None:
    """open + fsync + close of each ``mountpoint/name`` (best effort: a name may be gone)."""
    for name in names:
        try:
            fd = os.open(mountpoint / name, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.fsync(fd)
        except OSError as exc:
            log.error("could not write the kernel's cached writes of %s: %s", name, exc)
        finally:
            os.close(fd)


@contextmanager
def flush_on_stop(mountpoint: Path, open_names: Callable[[], list[str]],
                  stop_loop: Callable[[], bool]) -> Iterator[None]:
    """Run the body (libfuse's loop, in the main thread) with the stop signals taken by a
    watcher thread. ``open_names`` lists the files open in the mount (relative paths);
    ``stop_loop`` stops the loop, False when the mount is not up yet (the process then
    exits at once, with 128 + the signal number, as by default)."""
    main = threading.get_ident()
    previous_wake = signal.signal(WAKE_SIGNAL, lambda *_: None)
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            info = signal.sigtimedwait(STOP_SIGNALS, 0.2)
            if info is None or info.si_signo not in STOP_SIGNALS:
                continue  # a wait cut short (a tracer such as a profiler attaching)
            log.info("signal %d: writing the kernel's cached writes, then unmounting",
                     info.si_signo)
            if not stop_loop_after_flush():
                os._exit(128 + info.si_signo)
            signal.pthread_kill(main, WAKE_SIGNAL)
            return

    def stop_loop_after_flush() -> bool:
        try:
            syncfs(mountpoint)
        except OSError as exc:
            log.error("could not write the kernel's cached writes of %s: %s", mountpoint, exc)
        fsync_files(mountpoint, open_names())
        return stop_loop()

    watcher = threading.Thread(target=watch, name="stop-signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        signal.signal(WAKE_SIGNAL, previous_wake)
