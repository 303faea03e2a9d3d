"""Listing a bucket tree in ascending UTF-8 byte order of the keys.

Directory order is not key order (directory ``a`` holds keys ``a/...``, which sort
after ``a-b`` but before ``a0``), so the walk is a lazy merge: a heap holds keys and
unopened directories, each directory under the smallest string its keys can start with.
Popping a key emits it (every other entry's keys are >= it); popping a directory lists it
and pushes its entries. Directories whose keys cannot match the prefix or all sort at or
before ``start_after`` are never opened. (Python compares str by code point, which is the
UTF-8 byte order.)
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable
from itertools import count

from backends.core.base import ObjectInfo
from backends.posix import tree
from backends.posix.layout import DISPLACED, decode_name, is_canonical

_KEY, _DISPLACED_KEY, _DIR = 0, 1, 2
Describe = Callable[[str, int, os.stat_result], ObjectInfo]


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a name that is not UTF-8: no S3 key maps to it
        return False
    return True


class TreeLister:
    """A resumable sorted walk of one bucket directory (blocking; one thread at a time)."""

    def __init__(self, bucket_fd: int, *, prefix: str, start_after: str,
                 describe: Describe) -> None:
        self._bucket_fd = bucket_fd
        self._prefix = prefix
        self._start_after = start_after
        self._describe = describe
        self._seq = count()
        self._last: str | None = None
        # (lower bound, rank, seq, directory names, key prefix or key, entry name)
        self._heap: list[tuple[str, int, int, tuple[str, ...], str, str]] = [
            ("", _DIR, next(self._seq), (), "", "")]
        self._parent: tuple[tuple[str, ...], int] | None = None  # last directory used

    def close(self) -> None:
        """Release the cached directory fd (the bucket fd belongs to the caller)."""
        if self._parent is not None:
            os.close(self._parent[1])
            self._parent = None

    def _parent_fd(self, dirs: tuple[str, ...]) -> int | None:
        if self._parent is not None and self._parent[0] == dirs:
            return self._parent[1]
        self.close()
        fd = tree.walk(self._bucket_fd, dirs)
        if fd is not None:
            self._parent = (dirs, fd)
        return fd

    def _may_match(self, stem: str) -> bool:
        """Whether some key starting with ``stem`` passes the prefix and start_after."""
        prefix, after = self._prefix, self._start_after
        if not (stem.startswith(prefix) or prefix.startswith(stem)):
            return False
        return not (stem < after and not after.startswith(stem))

    def next_batch(self, limit: int) -> list[ObjectInfo]:
        """Up to ``limit`` further objects; an empty list when the walk is done."""
        out: list[ObjectInfo] = []
        while self._heap and len(out) < limit:
            _, rank, _, dirs, text, name = heapq.heappop(self._heap)
            if rank == _DIR:
                self._expand(dirs, text)
                continue
            if text == self._last:
                continue  # a stale displaced copy next to the object itself
            info = self._load(dirs, name, text)
            if info is not None:
                self._last = text
                out.append(info)
        return out

    def _expand(self, dirs: tuple[str, ...], base: str) -> None:
        fd = self._parent_fd(dirs)
        if fd is None:
            return  # removed meanwhile
        with os.scandir(fd) as entries:  # works on a duplicate; fd stays open and rewound
            listed = [(e.name, e.is_dir(follow_symlinks=False),
                       e.is_file(follow_symlinks=False)) for e in entries]
        for name, is_dir, is_file in listed:
            decoded = decode_name(name)
            if decoded is None or not _encodable(decoded.text):
                continue
            if decoded.kind == "continued":
                stem = base + decoded.text
                if is_dir and decoded.text and self._may_match(stem):
                    self._push(stem, _DIR, dirs + (name,), stem, "")
            elif decoded.kind == "displaced":
                key = base + decoded.text
                if is_file and self._wanted(key):
                    self._push(key, _DISPLACED_KEY, dirs, key, name)
            elif is_file:
                key = base + decoded.text
                if self._wanted(key):
                    self._push(key, _KEY, dirs, key, name)
            elif is_dir:
                stem = base + decoded.text + "/"
                if self._may_match(stem):
                    self._push(stem, _DIR, dirs + (name,), stem, "")

    def _wanted(self, key: str) -> bool:
        return key.startswith(self._prefix) and key > self._start_after

    def _push(self, bound: str, rank: int, dirs: tuple[str, ...], text: str,
              name: str) -> None:
        heapq.heappush(self._heap, (bound, rank, next(self._seq), dirs, text, name))

    def _load(self, dirs: tuple[str, ...], name: str, key: str) -> ObjectInfo | None:
        if not is_canonical(key, dirs, name):
            return None  # a name in the escape space that Squall did not write
        parent = self._parent_fd(dirs)
        if parent is None:
            return None
        # The object may have been (un)displaced since its directory was read (a key
        # below it was written or removed meanwhile): probe as tree.open_object does.
        other = name[len(DISPLACED):] if name.startswith(DISPLACED) else DISPLACED + name
        for probe in (name, other, name):
            opened = tree.open_regular(parent, probe)
            if opened is not None:
                break
        else:
            return None  # deleted meanwhile
        fd, st = opened
        try:
            return self._describe(key, fd, st)
        finally:
            os.close(fd)
