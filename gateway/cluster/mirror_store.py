"""Mirror copies: the unflushed writes of other members' keys this member keeps, durable,
so that they survive their owner (docs/cluster.md, "Mirrored write-back"), and the states
of keys handed over to this member by their previous owner or the holders of their copies.

One file per key in ``<data dir>/mirror``: a JSON header line (format version, bucket,
key, the member that sent it, epoch, sequence, deletion or object info), then the
object's bytes. Written to a temporary name, fsynced, renamed, directory fsynced: a copy
is durable before it is acknowledged. Small copies that arrive together are written as
one group (one worker call, one directory fsync for all of them: a group commit, as the
cache index does, :mod:`gateway.cache.commits`). A record is replaced only by a newer one,
``(epoch, seq)`` ordered: the epoch is the etcd revision of the membership view the
write was served under, the sequence the serving member's record sequence. Copies are
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

from backends.core.base import ObjectInfo
from backends.core.blocking import run_cache_blocking
from backends.core.errors import BackendError
from gateway.cache.commits import GroupCommit
from gateway.cache.keylock import KeyLocks
from gateway.cluster import wire

log = logging.getLogger("squall.cluster")
FORMAT = 2
CHUNK = 1 << 20
BK = tuple[str, str]
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
    path: Path
    offset: int

    @property
    def version(self) -> Version:
        return (self.epoch, self.seq)

    @property
    def deleted(self) -> bool:
        return self.info is None

    def to_json(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "key": self.key, "owner": self.owner,
                "epoch": self.epoch, "seq": self.seq, "deleted": self.deleted}


def _name(bucket: str, key: str) -> str:
    data = f"{bucket}\0{key}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest() + ".mir"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_header(path: Path) -> MirrorRecord | None:
    with open(path, "rb") as f:
        line = f.readline(1 << 20)
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


class MirrorStore:
    """The mirror copies this member holds, indexed in memory, one file each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.records: dict[BK, MirrorRecord] = {}
        self.locks = KeyLocks()
        #: small copies written together share a worker call and the directory's fsync
        self._commits: GroupCommit[tuple[Path, list[bytes]]] = GroupCommit(
            lambda files, _sync: _write_files(root, files))

    # -- start -------------------------------------------------------------------------
    async def load(self) -> None:
        """Read the directory (made if missing); temporary files of interrupted writes
        and files of another format are removed."""
        self.records = await run_cache_blocking(self._load)

    def _load(self) -> dict[BK, MirrorRecord]:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        records: dict[BK, MirrorRecord] = {}
        for path in self.root.iterdir():
            if path.name.startswith(".tmp-"):
                path.unlink(missing_ok=True)
            elif path.suffix == ".mir":
                record = _read_header(path)
                if record is None:
                    path.unlink(missing_ok=True)
                else:
                    records[(record.bucket, record.key)] = record
            elif path.suffix == ".json":  # an older format's bookkeeping
                path.unlink(missing_ok=True)
        return records

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
            path = self.root / _name(bucket, key)
            # Up to CHUNK bytes are gathered and written, synced and renamed in one
            # worker call; a larger body streams into the open file.
            pieces = [line]
            gathered = 0
            chunks = aiter(body)
            async for chunk in chunks:
                pieces.append(chunk)
                gathered += len(chunk)
                if gathered >= CHUNK:
                    break
            else:
                await self._commits.write((path, pieces), sync=True)
                self.records[bk] = MirrorRecord(bucket, key, owner, epoch, seq, info, path,
                                                len(line))
                return True
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
            return True
        finally:
            self.locks.release(bk)

    async def drop(self, items: Iterable[tuple[str, str, int, int]]) -> int:
        """Drop the copies of these keys no newer than the versions given; how many."""
        gone: list[Path] = []
        for bucket, key, epoch, seq in items:
            bk = (bucket, key)
            if self.locks.locked(bk):  # a copy is being written: after it
                await self.locks.acquire(bk)
                self.locks.release(bk)
            held = self.records.get(bk)
            if held is not None and held.version <= (epoch, seq):
                del self.records[bk]  # (no await between the check and this)
                gone.append(held.path)
        if gone:
            await run_cache_blocking(_unlink_all, gone)
        return len(gone)

    async def read(self, record: MirrorRecord) -> AsyncIterator[bytes]:
        """The bytes of ``record``'s object."""
        try:
            f: BinaryIO = await run_cache_blocking(open, record.path, "rb")
        except FileNotFoundError as exc:
            raise BackendError(f"mirror copy of {record.bucket}/{record.key} is gone") \
                from exc
        try:
            await run_cache_blocking(f.seek, record.offset)
            while chunk := await run_cache_blocking(f.read, CHUNK):
                yield chunk
        finally:
            f.close()

    async def clear(self) -> int:
        """Drop every copy (this member starts anew: they are all stale); how many."""
        gone = [r.path for r in self.records.values()]
        self.records = {}

        def clear() -> None:
            _unlink_all(gone)
            for path in self.root.glob("*.mir"):  # unreadable ones too
                path.unlink(missing_ok=True)

        await run_cache_blocking(clear)
        return len(gone)


def _write_files(root: Path, files: Sequence[tuple[Path, list[bytes]]]) -> None:
    """Write each file durably under a temporary name, then rename them all into place
    and fsync the directory once; nothing is renamed if any write fails (a group:
    :class:`~gateway.cache.commits.GroupCommit`; one key's writes never meet in one)."""
    done: list[tuple[Path, Path]] = []
    try:
        for path, pieces in files:
            tmp = root / f".tmp-{secrets.token_hex(8)}"
            done.append((tmp, path))
            with open(tmp, "wb") as f:
                f.writelines(pieces)
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        _unlink_all([tmp for tmp, _ in done])
        raise
    for tmp, path in done:
        os.replace(tmp, path)
    _fsync_dir(root)


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
