"""On-disk format version 1 of the blobseer_like store (reference: docs/blobseer-like.md).

Every file carries a magic and a version number: chunk files a 32-byte binary header,
records and descriptors a JSON object with ``magic`` and ``v``. A reader that finds
another magic or version refuses the file instead of misreading it.
"""

from __future__ import annotations

import json
import secrets
import struct
from dataclasses import dataclass, field
from typing import Any

from backends.core.base import ObjectInfo, ObjectMeta, PartInfo, UploadInfo
from backends.metajson import meta_from_json, meta_to_json

VERSION = 1
PROVIDER_MAGIC = "squall.blobseer.provider"
MEMBERS_MAGIC = "squall.blobseer.members"
RECORD_MAGIC = "squall.blobseer.record"
BUCKET_MAGIC = "squall.blobseer.bucket"

# Names inside a provider directory.
IDENTITY = "squall-blobseer.json"
MEMBERS = "members.json"
LOCK = "lock"
CHUNKS = "chunks"
RECORDS = "records"
BUCKETS = "buckets"
UPLOADS = "uploads"
TMP = "tmp"
UPLOAD_RECORD = "upload"

CHUNK_MAGIC = b"SQCK"
# magic, format version, flags (0), data length, CRC64-NVME of the data, reserved (0)
CHUNK_HEADER = struct.Struct("<4sHHQQQ")


class FormatError(ValueError):
    """A file is not a version-1 blobseer_like file (wrong magic, version or fields)."""


def dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def loads(blob: bytes, magic: str) -> dict[str, Any]:
    """The JSON object in ``blob``; FormatError unless it has ``magic`` and version 1."""
    try:
        data = json.loads(blob)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("magic") != magic:
        raise FormatError(f"not a {magic} file")
    if data.get("v") != VERSION:
        raise FormatError(f"{magic} version {data.get('v')!r} is not supported (only {VERSION})")
    return data


def new_id(prefix: str = "") -> str:
    """A fresh 32-hex-digit identifier, starting with ``prefix`` (a shard) if given."""
    return prefix + secrets.token_hex(16)[len(prefix):]


def record_name(seq: int) -> str:
    """A record file name: the sequence number (sorts by time), then randomness."""
    return f"{seq:020d}-{secrets.token_hex(6)}"


def pack_chunk_header(length: int, crc: int) -> bytes:
    return CHUNK_HEADER.pack(CHUNK_MAGIC, VERSION, 0, length, crc, 0)


def unpack_chunk_header(header: bytes) -> tuple[int, int]:
    """(length, crc) from a chunk file header; FormatError if it is not one."""
    if len(header) < CHUNK_HEADER.size:
        raise FormatError("chunk file shorter than its header")
    magic, version, _flags, length, crc, _ = CHUNK_HEADER.unpack_from(header)
    if magic != CHUNK_MAGIC:
        raise FormatError("not a chunk file")
    if version != VERSION:
        raise FormatError(f"chunk format version {version} is not supported")
    return length, crc


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """One chunk of a blob: where it is, how long, and the CRC64-NVME of its bytes."""

    provider: str
    id: str
    size: int
    crc: int

    def to_json(self) -> list[Any]:
        return [self.provider, self.id, self.size, f"{self.crc:016x}"]

    @classmethod
    def from_json(cls, data: Any) -> ChunkRef:
        try:
            provider, chunk_id, size, crc = data
            ref = cls(str(provider), str(chunk_id), int(size), int(crc, 16))
        except (TypeError, ValueError) as exc:
            raise FormatError(f"bad chunk reference {data!r}") from exc
        if ref.size <= 0 or len(ref.id) != 32:
            raise FormatError(f"bad chunk reference {data!r}")
        return ref


def _chunks_from(data: Any) -> tuple[ChunkRef, ...]:
    if not isinstance(data, list):
        raise FormatError("chunks must be a list")
    return tuple(ChunkRef.from_json(item) for item in data)


@dataclass(frozen=True, slots=True)
class Version:
    """One immutable version of a key: what S3 reports about it and its chunk map."""

    record: str  # record file name
    seq: int
    bucket: str
    key: str
    size: int
    etag: str
    mtime_ns: int
    meta: ObjectMeta
    chunks: tuple[ChunkRef, ...]
    replicas: tuple[str, ...] = ()  # providers holding the record file

    def info(self) -> ObjectInfo:
        return ObjectInfo(self.bucket, self.key, self.size, self.etag, self.mtime_ns / 1e9,
                          self.meta)

    def to_json(self) -> dict[str, Any]:
        return {"magic": RECORD_MAGIC, "v": VERSION, "kind": "object", "record": self.record,
                "seq": self.seq, "bucket": self.bucket, "key": self.key, "size": self.size,
                "etag": self.etag, "mtime_ns": self.mtime_ns, "meta": meta_to_json(self.meta),
                "chunks": [c.to_json() for c in self.chunks], "replicas": list(self.replicas)}


@dataclass(frozen=True, slots=True)
class Tombstone:
    """The deletion of a key: newer than every version it hides."""

    record: str
    seq: int
    bucket: str
    key: str
    mtime_ns: int
    replicas: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"magic": RECORD_MAGIC, "v": VERSION, "kind": "tombstone", "record": self.record,
                "seq": self.seq, "bucket": self.bucket, "key": self.key,
                "mtime_ns": self.mtime_ns, "replicas": list(self.replicas)}


@dataclass(frozen=True, slots=True)
class Upload:
    """A multipart upload in progress."""

    upload_id: str
    bucket: str
    key: str
    initiated_ns: int
    meta: ObjectMeta
    replicas: tuple[str, ...] = ()

    def info(self) -> UploadInfo:
        return UploadInfo(self.bucket, self.key, self.upload_id, self.initiated_ns / 1e9,
                          self.meta)

    def to_json(self) -> dict[str, Any]:
        return {"magic": RECORD_MAGIC, "v": VERSION, "kind": "upload",
                "upload_id": self.upload_id, "bucket": self.bucket, "key": self.key,
                "initiated_ns": self.initiated_ns, "meta": meta_to_json(self.meta),
                "replicas": list(self.replicas)}


@dataclass(frozen=True, slots=True)
class Part:
    """One uploaded part: its chunk map (shared with the object once completed)."""

    upload_id: str
    part_number: int
    record: str
    seq: int
    size: int
    etag: str
    mtime_ns: int
    checksum: tuple[str, str] | None
    chunks: tuple[ChunkRef, ...] = field(default=())

    def info(self) -> PartInfo:
        return PartInfo(self.part_number, self.etag, self.size, self.mtime_ns / 1e9,
                        self.checksum)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "magic": RECORD_MAGIC, "v": VERSION, "kind": "part", "upload_id": self.upload_id,
            "part_number": self.part_number, "record": self.record, "seq": self.seq,
            "size": self.size, "etag": self.etag, "mtime_ns": self.mtime_ns,
            "chunks": [c.to_json() for c in self.chunks]}
        if self.checksum is not None:
            out["checksum"] = list(self.checksum)
        return out


Record = Version | Tombstone | Upload | Part


def _str(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str):
        raise FormatError(f"record field {name!r} must be a string")
    return value


def _int(data: dict[str, Any], name: str) -> int:
    value = data.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FormatError(f"record field {name!r} must be a non-negative integer")
    return value


def _replicas(data: dict[str, Any]) -> tuple[str, ...]:
    value = data.get("replicas", [])
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise FormatError("record field 'replicas' must be a list of provider ids")
    return tuple(value)


def _meta(data: dict[str, Any]) -> ObjectMeta:
    try:
        return meta_from_json(data.get("meta", {}))
    except (ValueError, AttributeError) as exc:
        raise FormatError(f"bad metadata: {exc}") from exc


def decode_record(blob: bytes) -> Record:
    """Any version-1 record (object version, tombstone, upload, part); FormatError else."""
    data = loads(blob, RECORD_MAGIC)
    kind = data.get("kind")
    if kind == "object":
        return Version(_str(data, "record"), _int(data, "seq"), _str(data, "bucket"),
                       _str(data, "key"), _int(data, "size"), _str(data, "etag"),
                       _int(data, "mtime_ns"), _meta(data), _chunks_from(data.get("chunks")),
                       _replicas(data))
    if kind == "tombstone":
        return Tombstone(_str(data, "record"), _int(data, "seq"), _str(data, "bucket"),
                         _str(data, "key"), _int(data, "mtime_ns"), _replicas(data))
    if kind == "upload":
        return Upload(_str(data, "upload_id"), _str(data, "bucket"), _str(data, "key"),
                      _int(data, "initiated_ns"), _meta(data), _replicas(data))
    if kind == "part":
        checksum = data.get("checksum")
        if checksum is not None and (not isinstance(checksum, list) or len(checksum) != 2
                                     or not all(isinstance(x, str) for x in checksum)):
            raise FormatError("bad part checksum")
        return Part(_str(data, "upload_id"), _int(data, "part_number"), _str(data, "record"),
                    _int(data, "seq"), _int(data, "size"), _str(data, "etag"),
                    _int(data, "mtime_ns"), (checksum[0], checksum[1]) if checksum else None,
                    _chunks_from(data.get("chunks")))
    raise FormatError(f"unknown record kind {kind!r}")


def encode_record(record: Record) -> bytes:
    return dumps(record.to_json())


def decode_version(blob: bytes) -> Version:
    record = decode_record(blob)
    if not isinstance(record, Version):
        raise FormatError("not an object version record")
    return record


def decode_part(blob: bytes) -> Part:
    record = decode_record(blob)
    if not isinstance(record, Part):
        raise FormatError("not a part record")
    return record


def decode_upload(blob: bytes) -> Upload:
    record = decode_record(blob)
    if not isinstance(record, Upload):
        raise FormatError("not an upload record")
    return record


def bucket_json(bucket: str, created_ns: int) -> bytes:
    return dumps({"magic": BUCKET_MAGIC, "v": VERSION, "bucket": bucket,
                  "created_ns": created_ns})


def decode_bucket(blob: bytes) -> tuple[str, int]:
    data = loads(blob, BUCKET_MAGIC)
    return _str(data, "bucket"), _int(data, "created_ns")
