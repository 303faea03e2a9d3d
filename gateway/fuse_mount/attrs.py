"""File attributes: what ``stat`` shows for objects and prefixes, and a short TTL cache."""

from __future__ import annotations

import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.fuse_mount.store import RemoteObject

DIR_MODE = 0o755
FILE_MODE = 0o644


NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Attr:
    is_dir: bool
    size: int = 0
    mtime_ns: int = 0  # nanoseconds since the epoch (rsync compares them exactly)
    mode: int | None = None  # permission bits; None: the default for the kind
    uid: int | None = None
    gid: int | None = None
    etag: str | None = None  # of the object, when known (a stale kernel inode is found by it)

    @classmethod
    def of_object(cls, meta: RemoteObject) -> Attr:
        """Attributes of a file object; user metadata (mode, uid, gid, mtime) wins."""
        mtime = parse_mtime(meta.metadata.get("mtime"))
        return cls(False, meta.size, mtime if mtime is not None else _last_modified_ns(meta),
                   _int(meta.metadata, "mode", 8), _int(meta.metadata, "uid"),
                   _int(meta.metadata, "gid"), meta.etag or None)

    @classmethod
    def of_listed(cls, meta: RemoteObject) -> Attr:
        """Attributes of a file object from a listing (no user metadata: LastModified is
        the mtime, the mode and owner are the defaults)."""
        return cls(False, meta.size, _last_modified_ns(meta), etag=meta.etag or None)

    def to_stat(self, *, uid: int, gid: int, block_size: int) -> dict[str, Any]:
        """The stat fields (times in nanoseconds, as mfusepy's ``use_ns`` takes them)."""
        kind = stat.S_IFDIR if self.is_dir else stat.S_IFREG
        mode = self.mode if self.mode is not None else (DIR_MODE if self.is_dir else FILE_MODE)
        return {
            "st_mode": kind | (mode & 0o7777), "st_nlink": 1 if not self.is_dir else 2,
            "st_size": self.size, "st_uid": self.uid if self.uid is not None else uid,
            "st_gid": self.gid if self.gid is not None else gid,
            "st_mtime": self.mtime_ns, "st_ctime": self.mtime_ns, "st_atime": self.mtime_ns,
            "st_blksize": block_size, "st_blocks": (self.size + 511) // 512,
        }


def metadata_for(*, mode: int | None = None, uid: int | None = None, gid: int | None = None,
                 mtime_ns: int | None = None) -> dict[str, str]:
    """User metadata recording the given attributes (the keys ``Attr.of_object`` reads).

    ``mtime`` is s3fs's and rclone's ``x-amz-meta-mtime``: seconds since the epoch, here
    with nine decimals (exact nanoseconds).
    """
    values: dict[str, str] = {}
    if mode is not None:
        values["mode"] = format(mode & 0o7777, "o")
    if uid is not None:
        values["uid"] = str(uid)
    if gid is not None:
        values["gid"] = str(gid)
    if mtime_ns is not None:
        seconds, nanos = divmod(mtime_ns, NS)
        values["mtime"] = f"{seconds}.{nanos:09d}"
    return values


def parse_mtime(value: str | None) -> int | None:
    """Nanoseconds of an ``mtime`` value (``"1700000000"``, ``"1700000000.5"``, or
    nine decimals); None if absent or malformed."""
    if not value:
        return None
    seconds, _, fraction = value.strip().partition(".")
    if not (seconds.lstrip("-").isdigit() and (fraction.isdigit() or not fraction)):
        return None
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    return int(seconds) * NS + (nanos if not seconds.startswith("-") else -nanos)


def _last_modified_ns(meta: RemoteObject) -> int:
    """LastModified in nanoseconds (S3 gives at most milliseconds)."""
    return round(meta.mtime * 1000) * 1_000_000


def _int(metadata: Mapping[str, str], name: str, base: int = 10) -> int | None:
    try:
        return int(metadata[name], base)
    except (KeyError, ValueError):
        return None


class AttrCache:
    """path -> Attr (or None: known missing) for ``ttl`` seconds; thread-safe."""

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, Attr | None]] = {}

    def get(self, path: str) -> tuple[bool, Attr | None]:
        """(hit, attr): ``hit`` False when nothing fresh is known about ``path``."""
        with self._lock:
            entry = self._entries.get(path)
            if entry is None or entry[0] < time.monotonic():
                return False, None
            return True, entry[1]

    def put(self, path: str, attr: Attr | None) -> None:
        if self._ttl <= 0:
            return
        with self._lock:
            if len(self._entries) > 100_000:
                self._entries.clear()
            self._entries[path] = (time.monotonic() + self._ttl, attr)

    def fill(self, path: str, attr: Attr) -> None:
        """``put`` from a listing: an entry still fresh (from HeadObject, which carries
        the user metadata a listing lacks, or from this mount's own changes) is kept."""
        if self._ttl <= 0:
            return
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(path)
            if entry is not None and entry[0] >= now:
                return
            if len(self._entries) > 100_000:
                self._entries.clear()
            self._entries[path] = (now + self._ttl, attr)

    def invalidate(self, path: str) -> None:
        with self._lock:
            self._entries.pop(path, None)

    def invalidate_tree(self, path: str) -> None:
        with self._lock:
            prefix = path.rstrip("/") + "/"
            for p in [p for p in self._entries if p == path or p.startswith(prefix)]:
                del self._entries[p]
