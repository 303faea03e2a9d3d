"""What the kernel holds about the files of the mount, so that its caches stay correct.

With the kernel's writeback cache (the default), the kernel keeps its own size and mtime of
a file for as long as it keeps the file's inode: a getattr answer no longer changes them.
A file another client rewrote would then show its old size (reads cut short or padded
with zeros). Only a new inode learns the new size, and FUSE drops an inode as soon as
nothing uses it, so the mount makes the kernel drop its entry when the object changed:

* every answer about a closed file records the size and ETag told to the kernel;
* a lookup that finds the object changed (another size or ETag) answers ``ESTALE`` once,
  when the kernel's entry is expired (so the request is a lookup, not a getattr on a
  valid entry): the kernel drops the entry and its inode and looks the name up again,
  which gives a new inode with the gateway's size;
* an ``open`` that finds the object changed while the kernel's entry is still valid
  answers ``ESTALE`` and marks the name: the kernel retries the open with a forced lookup,
  which answers ``ESTALE`` once more, and the retried lookup makes the new inode.

The page cache follows the same ETags: an open keeps the kernel's cached pages
(``keep_cache``) only when the object is the version those pages were read from or
written as.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

MAX_ENTRIES = 100_000


@dataclass(slots=True)
class _Told:
    size: int
    etag: str | None
    at: float  # monotonic time of the last answer about the name (any kind)


def _same(told: _Told, size: int, etag: str | None) -> bool:
    return told.size == size and (told.etag is None or etag is None or told.etag == etag)


class KernelView:
    """Per path: the size and ETag the kernel was told, and the ETag of its cached pages.

    ``entry_timeout`` is the kernel's entry (and attribute) timeout of the mount;
    ``writeback`` says whether the kernel keeps sizes itself (the writeback cache).
    Thread-safe; no I/O.
    """

    def __init__(self, entry_timeout: float, *, writeback: bool) -> None:
        self._timeout = entry_timeout
        self._writeback = writeback
        self._lock = threading.Lock()
        self._told: dict[str, _Told] = {}
        self._pages: dict[str, str] = {}  # path -> ETag of the pages the kernel may cache
        self._force: set[str] = set()

    def answer(self, path: str, size: int, etag: str | None) -> bool:
        """A lookup or getattr of the closed file ``path`` is about to be answered with
        ``size``/``etag``. Returns False when the answer must be ``ESTALE`` instead (the
        kernel then forgets its stale inode and looks the name up again)."""
        if not self._writeback:
            return True
        now = time.monotonic()
        with self._lock:
            told = self._told.get(path)
            forced = path in self._force
            if told is None or (not forced and _same(told, size, etag)):
                self._record(path, size, etag, now)
                return True
            if forced or now - told.at >= self._timeout:
                self._force.discard(path)
                self._record(path, size, etag, now)
                self._pages.pop(path, None)  # the next inode starts with an empty cache
                return False
            told.at = now  # the entry may still be valid: a getattr; seen at expiry
            return True

    def stale_at_open(self, path: str, size: int, etag: str | None) -> bool:
        """An open of the closed file ``path`` found the object as ``size``/``etag``: True
        when the kernel's inode holds another size (the open must answer ``ESTALE``)."""
        if not self._writeback:
            return False
        with self._lock:
            told = self._told.get(path)
            if told is None or _same(told, size, etag):
                return False
            self._force.add(path)
            return True

    def keep_cache(self, path: str, etag: str | None) -> bool:
        """May an open of ``path`` (the object version ``etag``) keep the cached pages?"""
        with self._lock:
            return etag is not None and etag != "" and self._pages.get(path) == etag

    def opened(self, path: str, etag: str | None) -> None:
        """The kernel reads ``path`` as the version ``etag`` from now on."""
        with self._lock:
            if etag:
                self._trim()
                self._pages[path] = etag
            else:
                self._pages.pop(path, None)

    def committed(self, path: str, size: int, etag: str | None) -> None:
        """This mount stored ``path`` (written through the kernel: its pages and size are
        this content)."""
        with self._lock:
            self._record(path, size, etag, time.monotonic())
            if etag:
                self._pages[path] = etag
            else:
                self._pages.pop(path, None)

    def renamed(self, old: str, new: str) -> None:
        """The kernel moves its inode (size, pages) from ``old`` to ``new``."""
        with self._lock:
            self._force.discard(new)
            told, pages = self._told.pop(old, None), self._pages.pop(old, None)
            self._told.pop(new, None)
            self._pages.pop(new, None)
            if told is not None:
                self._told[new] = told
            if pages is not None:
                self._pages[new] = pages

    def removed(self, path: str) -> None:
        with self._lock:
            self._told.pop(path, None)
            self._pages.pop(path, None)
            self._force.discard(path)

    def _record(self, path: str, size: int, etag: str | None, now: float) -> None:
        self._trim()
        self._told[path] = _Told(size, etag or None, now)

    def _trim(self) -> None:
        if len(self._told) > MAX_ENTRIES or len(self._pages) > MAX_ENTRIES:
            self._told.clear()  # forgetting is safe: unknown names are answered as they are
            self._pages.clear()
