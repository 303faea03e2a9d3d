"""Mirror copies: the unflushed writes of other members' keys this member keeps, durable,
so that they survive their owner (docs/cluster.md, "Mirrored write-back"), and the states
of keys handed over to this member by their previous owner or the holders of their copies.

A copy is a JSON header line (format version, bucket, key, the member that sent it,
epoch, sequence, deletion or object info), then the object's bytes. Copies of up to
``INLINE_MAX`` bytes are values of a RocksDB database in ``<data dir>/mirror/copies``:
those that arrive together are written as one synced WriteBatch (one WAL fsync for all:
a group commit, as the cache index does, :mod:`gateway.cache.commits`). A larger copy is
one file in ``<data dir>/mirror``, streamed to a temporary name, fsynced, renamed,
directory fsynced. Either way a copy is durable before it is acknowledged. A record is
replaced only by a newer one, ``(epoch, seq)`` ordered: the epoch is the etcd revision
of the membership view the write was served under, the sequence the serving member's
record sequence (at start, of a key held both ways the newer is kept). Copies are
never flushed here: the owner flushes, then tells the mirrors to drop them; a copy of a
key this member comes to own is adopted (it becomes a record of its cache). A file of
another format (an older Squall's) is dropped at start.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from rocksdict import WriteBatch

from backends.core.base import ObjectInfo
from backends.core.blocking import run_cache_blocking
from backends.core.errors import BackendError
from backends.core.rocks import RocksDatabase
from gateway.cache.commits import GroupCommit
from gateway.cache.keylock import KeyLocks
from gateway.cluster import wire

log = logging.getLogger("squall.cluster")
FORMAT = 2
CHUNK = 1 << 20
INLINE_MAX = 256 << 10  # the largest copy kept in the database rather than a file
BK = tuple[str, str]
Change = tuple[bytes, bytes | None]  # a database key and its value (None: delete it)
Version = tuple[int, int]  # (owner epoch, sequence)


@dataclass(frozen=True, slots=True)
class MirrorRecord:
    """One mirror copy: an object (``info``) or a deletion (``info`` None)."""

    bucket: str
    key: str
    owner: str  # the member that sent it (the key's owner when it was written)
    epoch: int
    seq: int
    info: ObjectInfo | None
    path: Path | None  # None: the copy is a value of the database
    offset: int  # where the object's bytes start (after the header line)

    @property
    def version(self) -> Version:
        return (self.epoch, self.seq)

    @property
    def deleted(self) -> bool:
        return self.info is None

    def to_json(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "key": self.key, "owner": self.owner,
                "epoch": self.epoch, "seq": self.seq, "deleted": self.deleted}


def _db_key(bucket: str, key: str) -> bytes:
    return f"{bucket}\0{key}".encode("utf-8", "surrogatepass")


def _name(bucket: str, key: str) -> str:
    return hashlib.sha256(_db_key(bucket, key)).hexdigest() + ".mir"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse_header(line: bytes, path: Path | None) -> MirrorRecord | None:
    """The record a copy's header line describes; None if it is of another format."""
    try:
        head = json.loads(line)
    except ValueError:
        return None
    if not isinstance(head, dict) or head.get("v") != FORMAT:
        return None
    info = head.get("info")
    return MirrorRecord(head["bucket"], head["key"], str(head["owner"]),
                        int(head["epoch"]), int(head["seq"]),
                        wire.info_from(info) if info else None, path, len(line))


def _read_header(path: Path) -> MirrorRecord | None:
    with open(path, "rb") as f:
        return _parse_header(f.readline(1 << 20), path)


def _newer(found: dict[BK, MirrorRecord], record: MirrorRecord) -> MirrorRecord | None:
    """Keep ``record`` in ``found`` unless a newer one of its key is there; the record
    left out (to remove), if any."""
    bk = (record.bucket, record.key)
    held = found.get(bk)
    if held is not None and held.version >= record.version:
        return record
    found[bk] = record
    return held


class MirrorStore:
    """The mirror copies this member holds, indexed in memory; small ones in a RocksDB
    database, larger ones one file each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.records: dict[BK, MirrorRecord] = {}
        #: keys whose copy was put since the caller last emptied it
        self.fresh: set[BK] = set()
        self.locks = KeyLocks()
        self._db: RocksDatabase | None = None
        #: small copies written together share one RocksDB write and its WAL fsync
        self._commits: GroupCommit[list[Change]] = GroupCommit(self._write_many)

    # -- start and end -----------------------------------------------------------------
    async def load(self) -> None:
        """Open the database and read the directory (made if missing); temporary files
        of interrupted writes and copies of another format are removed."""
        self.records = await run_cache_blocking(self._load)

    def _load(self) -> dict[BK, MirrorRecord]:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        db = self._db = RocksDatabase(self.root / "copies", "mirror copies' database")
        records: dict[BK, MirrorRecord] = {}
        stale: list[bytes] = []

        def remove(record: MirrorRecord) -> None:
            if record.path is None:
                stale.append(_db_key(record.bucket, record.key))
            else:
                record.path.unlink(missing_ok=True)

        for db_key, value in db.items():
            record = _parse_header(value.split(b"\n", 1)[0] + b"\n", None)
            if record is None:
                stale.append(db_key)
            elif (gone := _newer(records, record)) is not None:
                remove(gone)
        for path in self.root.iterdir():
            if path.name.startswith(".tmp-"):
                path.unlink(missing_ok=True)
            elif path.suffix == ".mir":
                record = _read_header(path)
                if record is None:
                    path.unlink(missing_ok=True)
                elif (gone := _newer(records, record)) is not None:
                    remove(gone)
            elif path.suffix == ".json":  # an older format's bookkeeping
                path.unlink(missing_ok=True)
        if stale:
            self._write_many([[(k, None) for k in stale]], True)
        return records

    async def close(self) -> None:
        """Close the database (what was written is in its WAL)."""
        db, self._db = self._db, None
        if db is not None:
            await run_cache_blocking(db.close)

    def _database(self) -> RocksDatabase:
        if self._db is None:
            raise BackendError(f"the mirror copies at {self.root} are not open")
        return self._db

    def _write_many(self, batches: Sequence[list[Change]], sync: bool) -> None:
        """Apply ``batches`` as one WriteBatch (synced: one WAL fsync)."""
        batch = WriteBatch(raw_mode=True)
        for changes in batches:
            for db_key, value in changes:
                if value is None:
                    batch.delete(db_key)
                else:
                    batch.put(db_key, value)
        self._database().write(batch, sync=sync)

    # -- records -----------------------------------------------------------------------
    def held_for(self, owner: str) -> list[MirrorRecord]:
        return [r for r in list(self.records.values()) if r.owner == owner]

    async def put(self, bucket: str, key: str, *, owner: str, epoch: int, seq: int,
                  info: ObjectInfo | None, body: AsyncIterator[bytes]) -> bool:
        """Keep this copy (durably) unless a newer one is held; False if it was older.
        The body is read to its end either way."""
        bk = (bucket, key)
        await self.locks.acquire(bk)
        try:
            held = self.records.get(bk)
            if held is not None and held.version > (epoch, seq):
                async for _ in body:
                    pass
                return False
            head = {"v": FORMAT, "bucket": bucket, "key": key, "owner": owner,
                    "epoch": epoch, "seq": seq,
                    "info": wire.to_json(info) if info is not None else None}
            line = (wire.dumps(head) + "\n").encode()
            # A copy of up to INLINE_MAX bytes is gathered and goes to the database in
            # one group commit; a larger body streams into a file of its own.
            pieces = [line]
            gathered = 0
            chunks = aiter(body)
            async for chunk in chunks:
                pieces.append(chunk)
                gathered += len(chunk)
                if gathered > INLINE_MAX:
                    break
            else:
                await self._commits.write([(_db_key(bucket, key), b"".join(pieces))],
                                          sync=True)
                self.records[bk] = MirrorRecord(bucket, key, owner, epoch, seq, info, None,
                                                len(line))
                self.fresh.add(bk)
                if held is not None and held.path is not None:  # (load keeps the newer)
                    await run_cache_blocking(held.path.unlink, missing_ok=True)
                return True
            path = self.root / _name(bucket, key)
            tmp = self.root / f".tmp-{secrets.token_hex(8)}"
            f: BinaryIO = await run_cache_blocking(open, tmp, "wb")
            try:
                await run_cache_blocking(f.writelines, pieces)
                async for chunk in chunks:
                    await run_cache_blocking(f.write, chunk)
                await run_cache_blocking(_sync_close, f)
            except BaseException:
                f.close()
                tmp.unlink(missing_ok=True)
                raise
            await run_cache_blocking(_publish, tmp, path)
            self.records[bk] = MirrorRecord(bucket, key, owner, epoch, seq, info, path,
                                            len(line))
            self.fresh.add(bk)
            if held is not None and held.path is None:
                await self._commits.write([(_db_key(bucket, key), None)], sync=False)
            return True
        finally:
            self.locks.release(bk)

    async def drop(self, items: Iterable[tuple[str, str, int, int]]) -> int:
        """Drop the copies of these keys no newer than the versions given; how many."""
        gone: list[MirrorRecord] = []
        for bucket, key, epoch, seq in items:
            bk = (bucket, key)
            if self.locks.locked(bk):  # a copy is being written: after it
                await self.locks.acquire(bk)
                self.locks.release(bk)
            held = self.records.get(bk)
            if held is not None and held.version <= (epoch, seq):
                del self.records[bk]  # (no await between the check and this)
                gone.append(held)
        await self._remove(gone)
        return len(gone)

    async def _remove(self, records: Sequence[MirrorRecord]) -> None:
        """Delete the stored bytes of ``records`` (already out of :attr:`records`)."""
        deletes: list[Change] = [(_db_key(r.bucket, r.key), None)
                                 for r in records if r.path is None]
        if deletes:
            await self._commits.write(deletes, sync=False)
        files = [r.path for r in records if r.path is not None]
        if files:
            await run_cache_blocking(_unlink_all, files)

    async def read(self, record: MirrorRecord) -> AsyncIterator[bytes]:
        """The bytes of ``record``'s object."""
        gone = BackendError(f"mirror copy of {record.bucket}/{record.key} is gone")
        if record.path is None:
            value = await run_cache_blocking(self._database().get,
                                             _db_key(record.bucket, record.key))
            if value is None:
                raise gone
            yield value[record.offset:]
            return
        try:
            f: BinaryIO = await run_cache_blocking(open, record.path, "rb")
        except FileNotFoundError as exc:
            raise gone from exc
        try:
            await run_cache_blocking(f.seek, record.offset)
            while chunk := await run_cache_blocking(f.read, CHUNK):
                yield chunk
        finally:
            f.close()

    async def clear(self) -> int:
        """Drop every copy (this member starts anew: they are all stale); how many."""
        count = len(self.records)
        self.records = {}
        db = self._database()

        def clear() -> None:
            for path in self.root.glob("*.mir"):  # unreadable ones too
                path.unlink(missing_ok=True)
            self._write_many([[(k, None) for k, _ in db.items()]], True)

        await run_cache_blocking(clear)
        return count


def _unlink_all(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def _sync_close(f: BinaryIO) -> None:
    try:
        f.flush()
        os.fsync(f.fileno())
    finally:
        f.close()


def _publish(tmp: Path, path: Path) -> None:
    os.replace(tmp, path)
    _fsync_dir(path.parent)
