"""The local index in RocksDB: buckets, current versions, records, uploads and parts.

The providers are authoritative; the index is a fast local copy of what their records
say (rebuilt from them by :mod:`backends.blobseer_like.rebuild`). Every method blocks
(run it through ``run_blocking``); a change is one WriteBatch, WAL-synced when durable.
RocksDB errors become ServiceUnavailable.

Keys (bucket names never contain NUL, and the store refuses keys that do)::

    F                              format marker {"format", "version", "store"}
    S                              sequence high-water mark
    b<bucket>                      bucket {"created_ns", "replicas"}
    o<bucket>\\0<key>               current version (a version record)
    k<bucket>\\0<key>\\0<seq:020>     every record of the key on the providers
    u<upload id>                   upload record
    U<bucket>\\0<key>\\0<ns:020>\\0<id> listing order of uploads
    p<upload id>\\0<part:05>         part record
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from backends.blobseer_like import format as fmt
from backends.core.errors import ServiceUnavailable

INDEX_FORMAT = "squall-blobseer-index"

_FORMAT = b"F"
_SEQ = b"S"
_BUCKET = b"b"
_OBJECT = b"o"
_RECORD = b"k"
_UPLOAD = b"u"
_UPLOAD_ORDER = b"U"
_PART = b"p"
_BATCH = 256


def _k(text: str) -> bytes:
    return text.encode("utf-8")


def object_key(bucket: str, key: str) -> bytes:
    return _OBJECT + _k(bucket) + b"\0" + _k(key)


def _record_prefix(bucket: str, key: str) -> bytes:
    return _RECORD + _k(bucket) + b"\0" + _k(key) + b"\0"


def record_key(bucket: str, key: str, seq: int) -> bytes:
    return _record_prefix(bucket, key) + b"%020d" % seq


def _upload_order_key(upload: fmt.Upload) -> bytes:
    return (_UPLOAD_ORDER + _k(upload.bucket) + b"\0" + _k(upload.key) + b"\0"
            + b"%020d" % upload.initiated_ns + b"\0" + _k(upload.upload_id))


def part_key(upload_id: str, part_number: int) -> bytes:
    return _PART + _k(upload_id) + b"\0" + b"%05d" % part_number


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except (ServiceUnavailable, fmt.FormatError):
        raise
    except Exception as exc:  # rocksdict raises plain Exception subclasses
        raise ServiceUnavailable(f"blobseer_like index failure: {exc}") from exc


@dataclass(frozen=True, slots=True)
class RecordEntry:
    """One record file of a key, as the index knows it."""

    bucket: str
    key: str
    seq: int
    record: str
    kind: str  # "object" | "tombstone"
    replicas: tuple[str, ...]


class Batch:
    """Index changes applied atomically by :meth:`Index.write`."""

    __slots__ = ("deletes", "puts")

    def __init__(self) -> None:
        self.puts: list[tuple[bytes, bytes]] = []
        self.deletes: list[bytes] = []

    def add_record(self, record: fmt.Version | fmt.Tombstone) -> Batch:
        """Index a record file of a key (without making it the current version)."""
        kind = "object" if isinstance(record, fmt.Version) else "tombstone"
        self.puts.append((record_key(record.bucket, record.key, record.seq), fmt.dumps(
            {"record": record.record, "kind": kind, "replicas": list(record.replicas)})))
        return self

    def put_bucket(self, bucket: str, created_ns: int, replicas: list[str]) -> Batch:
        self.puts.append((_BUCKET + _k(bucket), fmt.dumps(
            {"created_ns": created_ns, "replicas": replicas})))
        return self

    def delete_bucket(self, bucket: str) -> Batch:
        self.deletes.append(_BUCKET + _k(bucket))
        return self

    def put_version(self, version: fmt.Version) -> Batch:
        self.puts.append((object_key(version.bucket, version.key),
                          fmt.encode_record(version)))
        return self.add_record(version)

    def put_tombstone(self, tomb: fmt.Tombstone) -> Batch:
        self.deletes.append(object_key(tomb.bucket, tomb.key))
        return self.add_record(tomb)

    def forget_record(self, entry: RecordEntry) -> Batch:
        self.deletes.append(record_key(entry.bucket, entry.key, entry.seq))
        return self

    def put_upload(self, upload: fmt.Upload) -> Batch:
        self.puts.append((_UPLOAD + _k(upload.upload_id), fmt.encode_record(upload)))
        self.puts.append((_upload_order_key(upload), b""))
        return self

    def delete_upload(self, upload: fmt.Upload, part_numbers: list[int]) -> Batch:
        self.deletes.append(_UPLOAD + _k(upload.upload_id))
        self.deletes.append(_upload_order_key(upload))
        self.deletes.extend(part_key(upload.upload_id, n) for n in part_numbers)
        return self

    def put_part(self, part: fmt.Part) -> Batch:
        self.puts.append((part_key(part.upload_id, part.part_number), fmt.encode_record(part)))
        return self

    def set_seq(self, seq: int) -> Batch:
        self.puts.append((_SEQ, str(seq).encode()))
        return self


class Index:
    """An open RocksDB index of one store."""

    def __init__(self, path: Path, store_id: str, *, durable: bool) -> None:
        path.mkdir(parents=True, exist_ok=True)
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        self._sync = WriteOptions()
        self._sync.sync = durable
        with _translated():
            self._db = Rdict(str(path), opts)
            marker = self._db.get(_FORMAT)
        self.created = marker is None
        if marker is None:
            batch = Batch()
            batch.puts.append((_FORMAT, fmt.dumps(
                {"format": INDEX_FORMAT, "version": fmt.VERSION, "store": store_id})))
            self.write(batch)
            return
        found = json.loads(marker)
        if (found.get("format"), found.get("version"), found.get("store")) != (
                INDEX_FORMAT, fmt.VERSION, store_id):
            self.close()
            raise ServiceUnavailable(f"the index at {path} is not a version-{fmt.VERSION} "
                                     f"index of store {store_id}: {found}")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._db.close()

    def write(self, batch: Batch) -> None:
        wb = WriteBatch(raw_mode=True)
        for key, value in batch.puts:
            wb.put(key, value)
        for key in batch.deletes:
            wb.delete(key)
        with _translated():
            self._db.write(wb, self._sync)

    def _get(self, key: bytes) -> bytes | None:
        with _translated():
            value: bytes | None = self._db.get(key)
        return value

    def _scan(self, prefix: bytes, start: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """(key without ``prefix``, value) for keys starting with ``prefix``, from ``start``."""
        with _translated():
            it = self._db.iter()
            it.seek(start if start is not None else prefix)
            while it.valid():
                key: bytes = it.key()
                if not key.startswith(prefix):
                    return
                yield key[len(prefix):], it.value()
                it.next()

    def seq(self) -> int:
        value = self._get(_SEQ)
        return int(value) if value else 0

    # -- buckets ---------------------------------------------------------------------

    def bucket(self, bucket: str) -> dict[str, Any] | None:
        value = self._get(_BUCKET + _k(bucket))
        return json.loads(value) if value is not None else None

    def buckets(self) -> list[tuple[str, dict[str, Any]]]:
        return [(k.decode(), json.loads(v)) for k, v in self._scan(_BUCKET)]

    def bucket_has_objects(self, bucket: str) -> bool:
        """Whether the bucket holds an object (multipart uploads are not counted)."""
        return any(True for _ in self._scan(_OBJECT + _k(bucket) + b"\0"))

    # -- versions and records --------------------------------------------------------

    def current(self, bucket: str, key: str) -> fmt.Version | None:
        value = self._get(object_key(bucket, key))
        return fmt.decode_version(value) if value is not None else None

    def versions(self, bucket: str, prefix: str, start_after: str,
                 limit: int = _BATCH) -> list[fmt.Version]:
        """Current versions of keys starting with ``prefix`` sorting after ``start_after``."""
        base = _OBJECT + _k(bucket) + b"\0"
        start = base + _k(prefix)
        if start_after and _k(start_after) >= _k(prefix):
            start = base + _k(start_after) + b"\0"  # the first key after start_after
        out: list[fmt.Version] = []
        for _key, value in self._scan(base + _k(prefix), start):
            out.append(fmt.decode_version(value))
            if len(out) >= limit:
                break
        return out

    def iter_versions(self) -> Iterator[fmt.Version]:
        for _key, value in self._scan(_OBJECT):
            yield fmt.decode_version(value)

    def records(self, bucket: str | None = None, key: str | None = None
                ) -> Iterator[RecordEntry]:
        """Record entries (of one key, or all), grouped by key, by ascending seq."""
        prefix = _record_prefix(bucket, key) if bucket is not None and key is not None \
            else _RECORD
        for rest, value in self._scan(prefix):
            full = prefix[len(_RECORD):] + rest
            bucket_b, _, tail = full.partition(b"\0")
            key_b, _, seq_b = tail.rpartition(b"\0")
            data = json.loads(value)
            yield RecordEntry(bucket_b.decode(), key_b.decode(), int(seq_b), data["record"],
                              data["kind"], tuple(data["replicas"]))

    # -- uploads and parts -----------------------------------------------------------

    def upload(self, upload_id: str) -> fmt.Upload | None:
        value = self._get(_UPLOAD + _k(upload_id))
        return fmt.decode_upload(value) if value is not None else None

    def uploads(self, bucket: str, prefix: str) -> list[fmt.Upload]:
        """Uploads of the bucket whose key starts with ``prefix``, in listing order."""
        out = []
        for rest, _ in self._scan(_UPLOAD_ORDER + _k(bucket) + b"\0" + _k(prefix)):
            upload = self.upload(rest.rpartition(b"\0")[2].decode())
            if upload is not None:
                out.append(upload)
        return out

    def all_uploads(self) -> Iterator[fmt.Upload]:
        for _key, value in self._scan(_UPLOAD):
            yield fmt.decode_upload(value)

    def parts(self, upload_id: str) -> list[fmt.Part]:
        return [fmt.decode_part(v) for _, v in self._scan(_PART + _k(upload_id) + b"\0")]

    def part(self, upload_id: str, part_number: int) -> fmt.Part | None:
        value = self._get(part_key(upload_id, part_number))
        return fmt.decode_part(value) if value is not None else None

    def iter_parts(self) -> Iterator[fmt.Part]:
        for _key, value in self._scan(_PART):
            yield fmt.decode_part(value)

    def clear(self) -> None:
        """Remove everything but the format marker (before a rebuild)."""
        with _translated():
            keys = [k for k in self._db.keys() if isinstance(k, bytes) and k != _FORMAT]  # noqa: SIM118
        batch = Batch()
        batch.deletes.extend(keys)
        self.write(batch)
