"""The peer protocol's JSON: object infos, metadata, uploads, typed errors, and the items
and answers of per-key deletes.

Everything is ASCII JSON (``ensure_ascii``) so it can travel in a header as well as in a
body; a typed error raised on the owner is raised again, same class and fields, on the
member that called it. Error classes are found by name among the loaded subclasses of
:class:`~backends.core.errors.StorageError`; a cluster member loads the S3 layer's (its peer
API maps errors through the S3 table), so the codec itself depends on no layer above it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backends.core.base import ObjectInfo, ObjectMeta, UploadInfo
from backends.core.errors import StorageError
from gateway.cluster.keyops import MAX_DELETE_ITEMS, DeleteAnswer, DeleteItem
from gateway.versioning.objects import DeleteOutcome

INFO_HEADER = "x-squall-info"
#: the largest body of a mirror-batch request (its copies' bytes and their heads)
MAX_BATCH_BYTES = 1 << 20
ERROR_HEADER = "x-squall-error"
#: the algorithm of the checksum a body sent to a peer verifies (the peer computes it again)
CHECKSUM_ALGORITHM_HEADER = "x-squall-checksum-algorithm"


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def meta_from(data: dict[str, Any]) -> ObjectMeta:
    checksum = data.get("checksum")
    return ObjectMeta(**{**data, "user": dict(data.get("user") or {}),
                         "tags": dict(data.get("tags") or {}),
                         "checksum": (checksum[0], checksum[1]) if checksum else None})


_FIELDS = {cls: tuple(f.name for f in dataclasses.fields(cls))
           for cls in (ObjectInfo, ObjectMeta, UploadInfo)}


def to_json(value: ObjectInfo | ObjectMeta | UploadInfo) -> dict[str, Any]:
    """``dataclasses.asdict`` of these three, a tenth of its cost (a copy per request)."""
    data = {name: getattr(value, name) for name in _FIELDS[type(value)]}
    if isinstance(value, ObjectMeta):
        data["user"], data["tags"] = dict(value.user), dict(value.tags)
    else:
        data["meta"] = to_json(value.meta)
    return data


def info_from(data: dict[str, Any]) -> ObjectInfo:
    return ObjectInfo(**{**data, "meta": meta_from(data["meta"])})


def upload_from(data: dict[str, Any]) -> UploadInfo:
    return UploadInfo(**{**data, "meta": meta_from(data["meta"])})


def _error_classes() -> dict[str, type[StorageError]]:
    found: dict[str, type[StorageError]] = {}
    pending: list[type[StorageError]] = [StorageError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.__name__, cls)
        pending.extend(cls.__subclasses__())
    return found


def error_to(exc: StorageError) -> dict[str, Any]:
    attrs = {k: v for k, v in vars(exc).items() if k not in ("message", "resource")
             and isinstance(v, str | int | float | bool | None)}
    return {"type": type(exc).__name__, "message": exc.message, "resource": exc.resource,
            "attrs": attrs}


def error_from(data: dict[str, Any]) -> StorageError:
    """The error ``error_to`` described (a plain StorageError if the class is unknown)."""
    cls = _error_classes().get(str(data.get("type")), StorageError)
    exc = cls.__new__(cls)
    StorageError.__init__(exc, str(data.get("message", "")),
                          resource=str(data.get("resource", "")))
    exc.__dict__.update(data.get("attrs") or {})
    return exc


def items_to_json(items: Sequence[DeleteItem]) -> list[dict[str, Any]]:
    return [{"key": key, "version_id": version_id} for key, version_id in items]


def items_from_json(data: object) -> list[DeleteItem]:
    """The items of a peer request; ValueError or TypeError if it is not a list of them."""
    if not isinstance(data, list) or len(data) > MAX_DELETE_ITEMS:
        raise ValueError(f"expected a list of at most {MAX_DELETE_ITEMS} objects")
    items: list[DeleteItem] = []
    for entry in data:
        key = entry.get("key") if isinstance(entry, dict) else None
        version_id = entry.get("version_id") if isinstance(entry, dict) else None
        if not isinstance(key, str) or not isinstance(version_id, str | None):
            raise TypeError("every object needs a string key and version_id")
        items.append((key, version_id))
    return items


def answer_to_json(answer: DeleteAnswer) -> dict[str, Any]:
    if isinstance(answer, StorageError):
        return {"error": error_to(answer)}
    return {"version_id": answer.version_id, "delete_marker": answer.delete_marker}


def answer_from_json(data: dict[str, Any]) -> DeleteAnswer:
    if "error" in data:
        return error_from(data["error"])
    return DeleteOutcome(data.get("version_id"), bool(data.get("delete_marker")))


@dataclass(frozen=True, slots=True)
class MirrorCopy:
    """One small write's state for a mirror: its bytes and info (None: a deletion), at
    ``(epoch, seq)``."""

    bucket: str
    key: str
    epoch: int
    seq: int
    info: ObjectInfo | None
    body: bytes


def copies_to(copies: Sequence[MirrorCopy]) -> bytes:
    """A mirror-batch body: one JSON line describing every copy, then their bytes in
    order."""
    head = [{"bucket": c.bucket, "key": c.key, "epoch": c.epoch, "seq": c.seq,
             "info": to_json(c.info) if c.info is not None else None, "size": len(c.body)}
            for c in copies]
    return b"".join([dumps(head).encode(), b"\n", *(c.body for c in copies)])


def copies_from(data: bytes) -> list[MirrorCopy]:
    """The copies of a mirror-batch body (ValueError, TypeError or KeyError if it is
    malformed)."""
    line, _, rest = data.partition(b"\n")
    copies, offset = [], 0
    for item in json.loads(line):
        size = int(item["size"])
        if size < 0 or offset + size > len(rest):
            raise ValueError("a copy's size runs past the body")
        info = item["info"]
        copies.append(MirrorCopy(str(item["bucket"]), str(item["key"]), int(item["epoch"]),
                                 int(item["seq"]), info_from(info) if info else None,
                                 rest[offset:offset + size]))
        offset += size
    if offset != len(rest):
        raise ValueError("bytes after the last copy")
    return copies
