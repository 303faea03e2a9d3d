"""The cache index in RocksDB (rocksdict): entries, uploads, parts, sequence high-water.

Blocking: every method but :meth:`Index.commit` is meant to run through ``run_cache_blocking``.
A durable write is one WriteBatch with ``sync=True`` (WAL fsync); :meth:`Index.commit`
lets concurrent durable writes share one (group commit, see commits.py). RocksDB errors
become ours, and a failed write reopens the database (backends/core/rocks.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from rocksdict import WriteBatch

from backends.core.errors import ServiceUnavailable
from backends.core.rocks import RocksDatabase, translated
from gateway.cache.commits import GroupCommit
from gateway.cache.entry import (
    BackendPart,
    Entry,
    Part,
    Upload,
    decode_backend_part,
    decode_entry,
    decode_part,
    decode_upload,
    encode_backend_part,
    encode_entry,
    encode_part,
    encode_upload,
)
from gateway.cache.inline import InlineBudget

INDEX_FORMAT = "squall-cache-index"
INDEX_VERSION = 1

_FORMAT_KEY = b"F"
_FORMAT_MARKER = json.dumps({"format": INDEX_FORMAT, "version": INDEX_VERSION}).encode()
_SEQ_KEY = b"S"
_ENTRY = b"o"
_UPLOAD = b"u"
_PART = b"p"
_FLUSH_UPLOAD = b"f"
_BACKEND_PART = b"r"


def entry_key(bucket: str, key: str) -> bytes:
    # Bucket names never contain NUL, so the first NUL separates bucket and key.
    return _ENTRY + bucket.encode() + b"\0" + key.encode("utf-8", "surrogatepass")


def upload_key(upload_id: str) -> bytes:
    return _UPLOAD + upload_id.encode()


def part_key(upload_id: str, part_number: int) -> bytes:
    return _PART + upload_id.encode() + b"\0" + b"%05d" % part_number


def backend_part_key(upload_id: str, part_number: int) -> bytes:
    """A part of a cached upload held in its backend multipart upload."""
    return _BACKEND_PART + upload_id.encode() + b"\0" + b"%05d" % part_number


@dataclass
class IndexContents:
    """Everything the index holds, as loaded on start."""

    entries: list[Entry] = field(default_factory=list)
    uploads: list[Upload] = field(default_factory=list)
    parts: dict[str, list[Part]] = field(default_factory=dict)
    seq: int = 0
    flush_uploads: dict[str, tuple[str, str]] = field(default_factory=dict)


class Batch:
    """Index changes applied atomically by :meth:`Index.write`."""

    __slots__ = ("deletes", "puts")

    def __init__(self) -> None:
        self.puts: list[tuple[bytes, bytes]] = []
        self.deletes: list[bytes] = []

    def put_entry(self, entry: Entry) -> Batch:
        self.puts.append((entry_key(entry.bucket, entry.key), encode_entry(entry)))
        return self

    def delete_entry(self, bucket: str, key: str) -> Batch:
        self.deletes.append(entry_key(bucket, key))
        return self

    def put_upload(self, upload: Upload) -> Batch:
        self.puts.append((upload_key(upload.upload_id), encode_upload(upload)))
        return self

    def delete_upload(self, upload_id: str, part_numbers: list[int]) -> Batch:
        self.deletes.append(upload_key(upload_id))
        self.deletes.extend(part_key(upload_id, n) for n in part_numbers)
        return self

    def put_part(self, upload_id: str, part: Part) -> Batch:
        self.puts.append((part_key(upload_id, part.part_number), encode_part(part)))
        return self

    def delete_parts(self, upload_id: str, part_numbers: list[int]) -> Batch:
        """Cached part records only (the upload stays)."""
        self.deletes.extend(part_key(upload_id, n) for n in part_numbers)
        return self

    def put_backend_part(self, upload_id: str, part: BackendPart) -> Batch:
        self.puts.append((backend_part_key(upload_id, part.part_number),
                          encode_backend_part(part)))
        return self

    def delete_backend_parts(self, upload_id: str, part_numbers: list[int]) -> Batch:
        self.deletes.extend(backend_part_key(upload_id, n) for n in part_numbers)
        return self

    def put_flush_upload(self, upload_id: str, bucket: str, key: str) -> Batch:
        """A backend multipart upload the flusher opened (aborted if found on start)."""
        self.puts.append((_FLUSH_UPLOAD + upload_id.encode(),
                          json.dumps({"v": 1, "bucket": bucket, "key": key}).encode()))
        return self

    def delete_flush_upload(self, upload_id: str) -> Batch:
        self.deletes.append(_FLUSH_UPLOAD + upload_id.encode())
        return self

    def put_format(self) -> Batch:
        """The format marker, written again as it is: a write that changes nothing, to
        learn whether the index takes writes."""
        self.puts.append((_FORMAT_KEY, _FORMAT_MARKER))
        return self

    def set_seq(self, seq: int) -> Batch:
        self.puts.append((_SEQ_KEY, str(seq).encode()))
        return self


class Index:
    """An open RocksDB index. Not thread-safe for open/close; writes may be concurrent."""

    def __init__(self, path: Path) -> None:
        self._rocks = RocksDatabase(path, "cache index")
        marker = self._rocks.get(_FORMAT_KEY)
        if marker is None:
            self.write(Batch().put_format(), sync=True)
        else:
            found = json.loads(marker)
            if found.get("format") != INDEX_FORMAT or found.get("version") != INDEX_VERSION:
                self._rocks.close()
                raise ServiceUnavailable(f"cache index at {path} has unsupported format "
                                         f"{found!r}; expected version {INDEX_VERSION}")
        #: the memory held by the inline payloads of loaded and new records
        self.inline = InlineBudget()
        self._group: GroupCommit[Batch] = GroupCommit(self.write_many)

    @property
    def failure(self) -> str | None:
        """Why the last write failed (None: it succeeded): writes cannot be acknowledged."""
        return self._rocks.failure

    def load(self) -> IndexContents:
        out = IndexContents()
        with translated(self._rocks.what):  # (a record that cannot be read, too)
            for raw_key, value in self._rocks.items():
                tag = raw_key[:1]
                if tag == _ENTRY:
                    out.entries.append(decode_entry(value, self.inline))
                elif tag == _UPLOAD:
                    out.uploads.append(decode_upload(value))
                elif tag == _PART:
                    upload_id = raw_key[1:].split(b"\0", 1)[0].decode()
                    out.parts.setdefault(upload_id, []).append(
                        decode_part(value, self.inline))
                elif tag == _FLUSH_UPLOAD:
                    data = json.loads(value)
                    out.flush_uploads[raw_key[1:].decode()] = (data["bucket"], data["key"])
                elif tag == _SEQ_KEY:
                    out.seq = max(out.seq, int(value))
        out.seq = max([out.seq] + [e.seq for e in out.entries])
        return out

    def backend_parts(self) -> dict[str, list[BackendPart]]:
        """Every backend part record, by upload id (one seek, then a prefix scan)."""
        out: dict[str, list[BackendPart]] = {}
        with translated(self._rocks.what):
            it = self._rocks.db.iter()
            it.seek(_BACKEND_PART)
            while it.valid():
                raw_key = cast(bytes, it.key())
                if not raw_key.startswith(_BACKEND_PART):
                    break
                upload_id = raw_key[1:].split(b"\0", 1)[0].decode()
                out.setdefault(upload_id, []).append(
                    decode_backend_part(cast(bytes, it.value())))
                it.next()
        return out

    def write(self, batch: Batch, *, sync: bool) -> None:
        """Apply ``batch`` atomically; with ``sync`` the WAL is fsynced before returning."""
        self.write_many((batch,), sync)

    def write_many(self, batches: Sequence[Batch], sync: bool) -> None:
        """Apply ``batches`` in order as one atomic WriteBatch (one WAL sync)."""
        wb = WriteBatch(raw_mode=True)
        for batch in batches:
            for k, v in batch.puts:
                wb.put(k, v)
            for k in batch.deletes:
                wb.delete(k)
        self._rocks.write(wb, sync=sync)

    async def commit(self, batch: Batch, *, sync: bool) -> None:
        """Apply ``batch`` from the event loop; synced writes of concurrent callers share
        one WAL sync. Returns once applied (and, with ``sync``, durable)."""
        await self._group.write(batch, sync=sync)

    @property
    def group_stats(self) -> tuple[int, int]:
        """(groups, batches) written by :meth:`commit` so far."""
        return self._group.groups, self._group.batches

    def close(self) -> None:
        self._rocks.close()
