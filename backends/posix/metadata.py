"""Object metadata on disk: a small versioned JSON record in an xattr or a sidecar file.

The record (ETag, ObjectMeta, and the size and mtime of the data it describes) lives in
the ``user.squall.meta`` xattr of the object's file. Where xattrs are unsupported, or a
record is too large for one, it lives in a sidecar file in the hidden area, keyed by the
file's inode (the xattr then holds a stub pointing there). A record whose size/mtime (and,
in a sidecar, inode) no longer match the file is stale: the file was changed by another
tool and is treated like a file without metadata. Format: docs/posix-layout.md.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from backends.core.base import ObjectMeta
from backends.files import fsync_dir, read_small, write_atomic
from backends.metajson import meta_from_json, meta_to_json

XATTR_NAME = "user.squall.meta"
MAGIC = "squall.meta"
SIDECAR_MAGIC = "squall.sidecar"
VERSION = 1

_NO_XATTRS = {errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM}
_TOO_BIG = {errno.E2BIG, errno.ENOSPC, errno.ERANGE}
_ABSENT = {errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP}


@dataclass(frozen=True, slots=True)
class Record:
    """What Squall knows about one object file beyond its bytes."""

    etag: str
    size: int
    mtime_ns: int
    meta: ObjectMeta
    ino: int | None = None  # set in sidecar records, which are not attached to the inode
    computed: bool = False  # ETag computed for a file another tool placed in the tree

    def describes(self, st: os.stat_result) -> bool:
        return (self.size == st.st_size and self.mtime_ns == st.st_mtime_ns
                and (self.ino is None or self.ino == st.st_ino))


def _record_json(record: Record) -> dict[str, Any]:
    out: dict[str, Any] = {"magic": MAGIC, "v": VERSION, "etag": record.etag,
                           "size": record.size, "mtime_ns": record.mtime_ns,
                           "meta": meta_to_json(record.meta)}
    if record.ino is not None:
        out["ino"] = record.ino
    if record.computed:
        out["computed"] = True
    return out


def _record_from(data: Any) -> Record | None:
    """A Record from JSON data; None for anything not a version-1 record."""
    try:
        if data.get("magic") != MAGIC or data.get("v") != VERSION or "etag" not in data:
            return None
        etag, size, mtime_ns = data["etag"], data["size"], data["mtime_ns"]
        ino = data.get("ino")
        if (not isinstance(etag, str) or not isinstance(size, int)
                or not isinstance(mtime_ns, int) or not isinstance(ino, int | None)):
            return None
        return Record(etag, size, mtime_ns, meta_from_json(data.get("meta", {})), ino,
                      bool(data.get("computed", False)))
    except (AttributeError, KeyError, ValueError, TypeError):
        return None


def _dumps(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def _loads(blob: bytes) -> Any:
    try:
        return json.loads(blob)
    except ValueError:
        return None


_STUB = _dumps({"magic": MAGIC, "v": VERSION, "sidecar": True})


class MetaStore:
    """Reads and writes object records (blocking; call through run_blocking)."""

    def __init__(self, sidecar_root: Path, tmp_dir: Path, *, use_xattrs: bool,
                 durable: bool) -> None:
        self._root = sidecar_root
        self._tmp = tmp_dir
        self.use_xattrs = use_xattrs
        self._durable = durable

    def sidecar_path(self, bucket: str, key: str) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()
        return self._root / bucket / digest[:2] / digest

    def load(self, bucket: str, key: str, fd: int, st: os.stat_result) -> Record | None:
        """The valid record of the open object file ``fd``, or None."""
        if self.use_xattrs:
            try:
                data = _loads(os.getxattr(fd, XATTR_NAME))
            except OSError as exc:
                if exc.errno not in _ABSENT:
                    raise
            else:
                record = _record_from(data)
                if record is not None:
                    return record if record.describes(st) else None
                if not (isinstance(data, dict) and data.get("sidecar") is True):
                    return None
        for record in self._read_sidecar(bucket, key):
            if record.ino == st.st_ino and record.describes(st):
                return record
        return None

    def store(self, bucket: str, key: str, fd: int, record: Record, *,
              current_ino: int | None) -> None:
        """Attach ``record`` to the file ``fd`` (a new or the current object file).

        ``current_ino`` is the inode of the object file being replaced (or the same file):
        its sidecar record is kept so that streams already open on it stay described.
        """
        if self.use_xattrs:
            try:
                os.setxattr(fd, XATTR_NAME, _dumps(_record_json(record)))
                return
            except OSError as exc:
                if exc.errno not in _TOO_BIG | _NO_XATTRS:
                    raise
                stub = exc.errno in _TOO_BIG
        else:
            stub = False
        ino = os.fstat(fd).st_ino
        kept = [r for r in self._read_sidecar(bucket, key)
                if r.ino == current_ino and r.ino != ino]
        self._write_sidecar(bucket, key, [replace(record, ino=ino), *kept])
        if stub:
            os.setxattr(fd, XATTR_NAME, _STUB)

    def cache_computed(self, fd: int, record: Record) -> None:
        """Best effort: remember an ETag computed for a foreign file (xattr mode only)."""
        if not self.use_xattrs:
            return
        # Read-only file, no permission, no xattrs: compute again next time.
        with contextlib.suppress(OSError):
            os.setxattr(fd, XATTR_NAME, _dumps(_record_json(replace(record, computed=True))))

    def forget(self, bucket: str, key: str) -> None:
        """Drop the sidecar of a deleted key, if any."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.sidecar_path(bucket, key))

    def _read_sidecar(self, bucket: str, key: str) -> list[Record]:
        try:
            data = _loads(read_small(self.sidecar_path(bucket, key)))
        except FileNotFoundError:
            return []
        if (not isinstance(data, dict) or data.get("magic") != SIDECAR_MAGIC
                or data.get("v") != VERSION or data.get("key") != key
                or not isinstance(data.get("records"), list)):
            return []
        return [r for r in map(_record_from, data["records"]) if r is not None]

    def _write_sidecar(self, bucket: str, key: str, records: list[Record]) -> None:
        path = self.sidecar_path(bucket, key)
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
            if self._durable:
                fsync_dir(path.parent.parent)
                fsync_dir(path.parent.parent.parent)
        blob = _dumps({"magic": SIDECAR_MAGIC, "v": VERSION, "key": key,
                       "records": [_record_json(r) for r in records]})
        write_atomic(path, blob, tmp_dir=self._tmp, durable=self._durable)


def detect_xattrs(probe_dir: Path) -> bool:
    """Whether the file system under ``probe_dir`` keeps user xattrs."""
    path = probe_dir / f"xattr-probe-{os.getpid()}-{id(probe_dir)}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.setxattr(fd, XATTR_NAME, b"{}")
        return True
    except OSError as exc:
        if exc.errno in _NO_XATTRS:
            return False
        raise
    finally:
        os.close(fd)
        os.unlink(path)
