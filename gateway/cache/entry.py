"""Index records of the cache tier: entry states, entries, uploads, and their encoding.

Records are frozen; a change replaces the record. Every record is stored in RocksDB as
versioned JSON (``"v": 1``, or ``"v": 2`` for what version 1 could not represent: an
upload with a backend upload, and the parts held there; entries and parts with inline
segments, whose payloads follow the JSON after a newline); see docs/cache.md.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from backends.core.base import ObjectInfo, ObjectMeta, PartInfo, UploadInfo
from gateway.cache.inline import InlineBudget, InlinePayload

RECORD_VERSION = 1
#: records that refer to a backend multipart upload (readers of version 1 refuse them
#: rather than silently drop the parts held on the backend)
BACKEND_RECORD_VERSION = 2
#: entries and parts with inline segments (version 2 as well: ``<json>\n<payloads>``)
INLINE_RECORD_VERSION = 2
_KNOWN_VERSIONS = (RECORD_VERSION, BACKEND_RECORD_VERSION)
_INLINE = "inline"


class EntryState(enum.Enum):
    """CLEAN: the backend holds this version. DIRTY: only the cache does.
    FLUSHING: a flush of this version is in flight (reverts to DIRTY on restart)."""

    CLEAN = "CLEAN"
    DIRTY = "DIRTY"
    FLUSHING = "FLUSHING"


@dataclass(frozen=True, slots=True)
class Segment:
    """One data file on a cache volume: ``size`` payload bytes with MD5 ``md5`` (and, for
    a multipart part, the additional checksum its upload carried).

    An *inline* segment has no file: its bytes (``inline``) live in the index record
    and in memory; it is still charged to ``volume`` like a file, and ``file`` is a unique
    name (so pins and sweeps need no special case)."""

    volume: str  # volume id (from the volume's marker file)
    file: str  # file name inside the volume's data directory
    size: int
    md5: str
    checksum: tuple[str, str] | None = None
    inline: InlinePayload | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Entry:
    """The cached state of one key. ``deleted`` marks a tombstone (a delete to flush)."""

    bucket: str
    key: str
    state: EntryState
    seq: int
    size: int
    etag: str
    meta: ObjectMeta
    segments: tuple[Segment, ...]
    last_modified: float
    dirty_since: float | None = None
    deleted: bool = False

    @property
    def bk(self) -> tuple[str, str]:
        return (self.bucket, self.key)

    @property
    def dirty(self) -> bool:
        return self.state is not EntryState.CLEAN

    def info(self) -> ObjectInfo:
        return ObjectInfo(bucket=self.bucket, key=self.key, size=self.size, etag=self.etag,
                          last_modified=self.last_modified, meta=self.meta)


@dataclass(frozen=True, slots=True)
class Part:
    """A multipart part held in the cache."""

    part_number: int
    etag: str
    size: int
    last_modified: float
    segment: Segment
    checksum: tuple[str, str] | None = None

    def info(self) -> PartInfo:
        return PartInfo(part_number=self.part_number, etag=self.etag, size=self.size,
                        last_modified=self.last_modified, checksum=self.checksum)


@dataclass(frozen=True, slots=True)
class BackendPart:
    """A part of a cached upload that lives in the upload's backend multipart upload
    (recorded once the backend acknowledged it)."""

    part_number: int
    etag: str
    size: int
    last_modified: float
    checksum: tuple[str, str] | None = None

    def info(self) -> PartInfo:
        return PartInfo(part_number=self.part_number, etag=self.etag, size=self.size,
                        last_modified=self.last_modified, checksum=self.checksum)


@dataclass(frozen=True, slots=True)
class Upload:
    """A multipart upload held in the cache (its parts are kept in separate records).

    ``backend_upload_id`` names the inner backend's multipart upload that holds the parts
    which did not go to the cache (created on first need, recorded before any part is
    sent there)."""

    upload_id: str
    bucket: str
    key: str
    initiated: float
    meta: ObjectMeta = field(default_factory=ObjectMeta)
    backend_upload_id: str | None = None

    def info(self) -> UploadInfo:
        return UploadInfo(bucket=self.bucket, key=self.key, upload_id=self.upload_id,
                          initiated=self.initiated, meta=self.meta)


# -- encoding ---------------------------------------------------------------------------

def _meta_to(meta: ObjectMeta) -> dict[str, Any]:
    return {
        "content_type": meta.content_type, "content_encoding": meta.content_encoding,
        "content_disposition": meta.content_disposition,
        "content_language": meta.content_language, "cache_control": meta.cache_control,
        "expires": meta.expires, "user": dict(meta.user), "tags": dict(meta.tags),
        "checksum": list(meta.checksum) if meta.checksum else None,
    }


def _meta_from(data: dict[str, Any]) -> ObjectMeta:
    checksum = data.get("checksum")
    return ObjectMeta(
        content_type=data["content_type"], content_encoding=data.get("content_encoding"),
        content_disposition=data.get("content_disposition"),
        content_language=data.get("content_language"),
        cache_control=data.get("cache_control"), expires=data.get("expires"),
        user=dict(data.get("user") or {}), tags=dict(data.get("tags") or {}),
        checksum=(checksum[0], checksum[1]) if checksum else None)


def _segment_to(seg: Segment) -> list[Any]:
    out: list[Any] = [seg.volume, seg.file, seg.size, seg.md5]
    if seg.inline is not None:
        out += [list(seg.checksum) if seg.checksum else None, _INLINE]
    elif seg.checksum is not None:
        out.append(list(seg.checksum))
    return out


def _segment_from(data: list[Any], tail: memoryview, budget: InlineBudget | None,
                  taken: list[int]) -> Segment:
    """A segment; an inline one takes its payload from ``tail`` at ``taken[0]``."""
    checksum = data[4] if len(data) > 4 else None
    size = int(data[2])
    inline = None
    if len(data) > 5 and data[5] == _INLINE:
        start = taken[0]
        if start + size > len(tail):
            raise ValueError("cache index record shorter than its inline segments")
        inline = InlinePayload(bytes(tail[start:start + size]), budget)
        taken[0] = start + size
    return Segment(volume=data[0], file=data[1], size=size, md5=data[3],
                   checksum=(checksum[0], checksum[1]) if checksum else None, inline=inline)


def _dump_segments(payload: dict[str, Any], segments: tuple[Segment, ...]) -> bytes:
    """``payload`` as a record; with inline segments, version 2 and their bytes after it."""
    payloads = [s.inline.data for s in segments if s.inline is not None]
    if not payloads:
        return _dump(payload)
    return b"".join((_dump(payload, INLINE_RECORD_VERSION), b"\n", *payloads))


def _split(raw: bytes) -> tuple[bytes, memoryview]:
    """The JSON of a record and the inline payloads after it (JSON has no raw newline)."""
    end = raw.find(b"\n")
    if end < 0:
        return raw, memoryview(b"")
    return raw[:end], memoryview(raw)[end + 1:]


def _dump(payload: dict[str, Any], version: int = RECORD_VERSION) -> bytes:
    payload["v"] = version
    return json.dumps(payload, separators=(",", ":")).encode()


def _load(raw: bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(raw)
    if data.get("v") not in _KNOWN_VERSIONS:
        raise ValueError(f"unsupported cache index record version {data.get('v')!r}")
    return data


def encode_entry(entry: Entry) -> bytes:
    return _dump_segments({
        "bucket": entry.bucket, "key": entry.key, "state": entry.state.value,
        "seq": entry.seq, "size": entry.size, "etag": entry.etag,
        "meta": _meta_to(entry.meta), "segments": [_segment_to(s) for s in entry.segments],
        "last_modified": entry.last_modified, "dirty_since": entry.dirty_since,
        "deleted": entry.deleted}, entry.segments)


def decode_entry(raw: bytes, budget: InlineBudget | None = None) -> Entry:
    """An entry record; inline payloads are counted in ``budget``."""
    head, tail = _split(raw)
    d = _load(head)
    taken = [0]
    return Entry(bucket=d["bucket"], key=d["key"], state=EntryState(d["state"]),
                 seq=int(d["seq"]), size=int(d["size"]), etag=d["etag"],
                 meta=_meta_from(d["meta"]),
                 segments=tuple(_segment_from(s, tail, budget, taken) for s in d["segments"]),
                 last_modified=float(d["last_modified"]), dirty_since=d.get("dirty_since"),
                 deleted=bool(d.get("deleted", False)))


def encode_upload(upload: Upload) -> bytes:
    payload = {"upload_id": upload.upload_id, "bucket": upload.bucket, "key": upload.key,
               "initiated": upload.initiated, "meta": _meta_to(upload.meta)}
    if upload.backend_upload_id is None:
        return _dump(payload)
    payload["backend_upload_id"] = upload.backend_upload_id
    return _dump(payload, BACKEND_RECORD_VERSION)


def decode_upload(raw: bytes) -> Upload:
    d = _load(raw)
    return Upload(upload_id=d["upload_id"], bucket=d["bucket"], key=d["key"],
                  initiated=float(d["initiated"]), meta=_meta_from(d["meta"]),
                  backend_upload_id=d.get("backend_upload_id"))


def encode_part(part: Part) -> bytes:
    return _dump_segments(
        {"part_number": part.part_number, "etag": part.etag, "size": part.size,
         "last_modified": part.last_modified, "segment": _segment_to(part.segment),
         "checksum": list(part.checksum) if part.checksum else None}, (part.segment,))


def decode_part(raw: bytes, budget: InlineBudget | None = None) -> Part:
    head, tail = _split(raw)
    d = _load(head)
    checksum = d.get("checksum")
    return Part(part_number=int(d["part_number"]), etag=d["etag"], size=int(d["size"]),
                last_modified=float(d["last_modified"]),
                segment=_segment_from(d["segment"], tail, budget, [0]),
                checksum=(checksum[0], checksum[1]) if checksum else None)


def encode_backend_part(part: BackendPart) -> bytes:
    return _dump({"part_number": part.part_number, "etag": part.etag, "size": part.size,
                  "last_modified": part.last_modified,
                  "checksum": list(part.checksum) if part.checksum else None},
                 BACKEND_RECORD_VERSION)


def decode_backend_part(raw: bytes) -> BackendPart:
    d = _load(raw)
    checksum = d.get("checksum")
    return BackendPart(part_number=int(d["part_number"]), etag=d["etag"], size=int(d["size"]),
                       last_modified=float(d["last_modified"]),
                       checksum=(checksum[0], checksum[1]) if checksum else None)
