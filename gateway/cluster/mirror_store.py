"""Mirror copies: the unflushed writes of other members' keys this member keeps, durable,
so that they survive their owner (docs/cluster.md, "Mirrored write-back").

One file per key in ``<data dir>/mirror``: a JSON header line (format version, bucket,
key, owner, epoch, sequence, deletion or object info), then the object's bytes. Written
to a temporary name, fsynced, renamed, directory fsynced: a copy is durable before it is
acknowledged. A record is replaced only by a newer one, ``(epoch, seq)`` ordered. Mirror
copies are never flushed: the owner flushes, then tells the mirrors to drop them.

``epochs.json`` keeps the highest owner epoch this member has seen for each member, and
``acted.json`` the keys of down members this member has written as their acting owner
(the returning owner asks for them; see :mod:`gateway.cluster.replication`), and
``ring.json`` the member list (ring id) all of them refer to: members are named by node
id, so they are dropped when the list changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from backends.base import ObjectInfo
from backends.blocking import run_cache_blocking
from backends.errors import BackendError
from gateway.cache.keylock import KeyLocks
from gateway.cluster import wire

log = logging.getLogger("squall.cluster")
FORMAT = 1
RING_FILE = "ring.json"  # the member list (ring id) the copies, epochs and keys are of
CHUNK = 1 << 20
BK = tuple[str, str]
Version = tuple[int, int]  # (owner epoch, sequence)


@dataclass(frozen=True, slots=True)
class MirrorRecord:
    """One mirror copy: an object (``info``) or a deletion (``info`` None)."""

    bucket: str
    key: str
    owner: int
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
        return MirrorRecord(head["bucket"], head["key"], int(head["owner"]),
                            int(head["epoch"]), int(head["seq"]),
                            wire.info_from(info) if info else None, path, len(line))


class MirrorStore:
    """The mirror copies this member holds, indexed in memory, one file each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.records: dict[BK, MirrorRecord] = {}
        self.epochs: dict[int, int] = {}
        self.acted: dict[int, set[BK]] = {}
        self.locks = KeyLocks()

    # -- start -------------------------------------------------------------------------
    async def load(self, ring_id: str) -> None:
        """Read the directory (made if missing); temporary files of interrupted writes
        are removed. What was kept under another member list (``ring_id`` differs: node
        ids name other members now) is dropped: copies, epochs, keys acted for."""
        self.records, self.epochs, self.acted = await run_cache_blocking(self._load)
        try:
            kept = json.loads((self.root / RING_FILE).read_text()).get("ring")
        except (FileNotFoundError, ValueError, AttributeError):
            kept = None
        if kept is None:  # a new directory, or one older than the ring file
            await run_cache_blocking(self._save, RING_FILE, {"ring": ring_id})
        elif kept != ring_id:
            log.warning("%d mirror copies kept under another member list are dropped",
                        len(self.records))
            await self.clear(ring_id=ring_id)

    def _load(self) -> tuple[dict[BK, MirrorRecord], dict[int, int], dict[int, set[BK]]]:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        records: dict[BK, MirrorRecord] = {}
        for path in self.root.iterdir():
            if path.name.startswith(".tmp-"):
                path.unlink(missing_ok=True)
            elif path.suffix == ".mir":
                record = _read_header(path)
                if record is not None:
                    records[(record.bucket, record.key)] = record
        epochs: dict[int, int] = {}
        acted: dict[int, set[BK]] = {}
        with contextlib.suppress(FileNotFoundError, ValueError):
            epochs = {int(k): int(v) for k, v in
                      json.loads((self.root / "epochs.json").read_text()).items()}
        with contextlib.suppress(FileNotFoundError, ValueError):
            acted = {int(k): {(b, k2) for b, k2 in v} for k, v in
                     json.loads((self.root / "acted.json").read_text()).items()}
        return records, epochs, acted

    # -- records -----------------------------------------------------------------------
    def held_for(self, owner: int) -> list[MirrorRecord]:
        return [r for r in list(self.records.values()) if r.owner == owner]

    async def put(self, bucket: str, key: str, *, owner: int, epoch: int, seq: int,
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
                await run_cache_blocking(_write_file, self.root, path, pieces)
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

    async def clear(self, *, ring_id: str | None = None) -> int:
        """Drop every copy (a live membership change, once nothing is unflushed anywhere:
        they are all garbage); how many. With ``ring_id`` (the change is committed: the
        members are renumbered) the epochs and keys acted for go too, and the copies
        kept from now on are those of that member list. The files stay (empty), so a
        restart does not look like a new data directory."""
        gone = [r.path for r in self.records.values()]
        self.records = {}
        if ring_id is not None:
            self.epochs, self.acted = {}, {}

        def clear() -> None:
            _unlink_all(gone)
            for path in self.root.glob("*.mir"):  # unreadable ones too
                path.unlink(missing_ok=True)
            if ring_id is not None:
                self._save("epochs.json", {})
                self._save("acted.json", {})
                self._save(RING_FILE, {"ring": ring_id})

        await run_cache_blocking(clear)
        return len(gone)

    # -- epochs and keys acted for -----------------------------------------------------
    async def raise_epoch(self, node: int, epoch: int) -> None:
        if self.epochs.get(node, 0) < epoch:
            self.epochs[node] = epoch
            await run_cache_blocking(self._save, "epochs.json",
                                     {str(k): v for k, v in self.epochs.items()})

    async def note_acted(self, owner: int, bk: BK) -> None:
        keys = self.acted.setdefault(owner, set())
        if bk not in keys:
            keys.add(bk)
            await self._save_acted()

    async def forget_acted(self, owner: int, keys: Iterable[BK]) -> None:
        held = self.acted.get(owner, set())
        held.difference_update(keys)
        if not held:
            self.acted.pop(owner, None)
        await self._save_acted()

    async def _save_acted(self) -> None:
        await run_cache_blocking(self._save, "acted.json",
                                 {str(k): sorted(v) for k, v in self.acted.items()})

    def _save(self, name: str, value: object) -> None:
        tmp = self.root / f".tmp-{secrets.token_hex(8)}"
        with open(tmp, "w") as f:
            json.dump(value, f)
            f.flush()
            os.fsync(f.fileno())
        _publish(tmp, self.root / name)


def _write_file(root: Path, path: Path, pieces: list[bytes]) -> None:
    tmp = root / f".tmp-{secrets.token_hex(8)}"
    try:
        with open(tmp, "wb") as f:
            f.writelines(pieces)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _publish(tmp, path)


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
