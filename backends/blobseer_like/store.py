"""The core of a blobseer_like store: providers, index, pins, and the commit of versions.

A write never takes a lock while its data moves: chunks are written to fresh files with
unique names, so any number of writers of one key proceed in parallel. Only the commit
(BlobSeer's version assignment) is serialised per key: it checks the preconditions,
takes the next sequence number, writes the version record on its replica providers and
updates the index, in that order. The commit that completes last is the newest version.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from backends.blobseer_like import format as fmt
from backends.blobseer_like.config import BlobseerConfig
from backends.blobseer_like.index import Batch, Index
from backends.blobseer_like.pins import Pin, PinSet
from backends.blobseer_like.pool import ProviderPool
from backends.blobseer_like.provider import Provider
from backends.blobseer_like.rebuild import RebuildReport, rebuild_index
from backends.core.blocking import run_blocking
from backends.core.conditions import check_write_conditions
from backends.core.errors import BackendError, NoSuchBucket
from backends.locks import NamedLocks
from backends.oserrors import os_errors

T = TypeVar("T")
log = logging.getLogger("squall.blobseer")

# Builds the record of a commit from (current version or None, seq, record name, replicas);
# returns None to commit nothing.
Builder = Callable[[fmt.Version | None, int, str, tuple[str, ...]],
                   fmt.Version | fmt.Tombstone | None]


class BucketGate:
    """Commits into a bucket share it; deleting the bucket waits for them and holds new
    ones back (a deleted bucket never receives a late object)."""

    def __init__(self) -> None:
        self._users: collections.Counter[str] = collections.Counter()
        self._closing: set[str] = set()

    @contextlib.asynccontextmanager
    async def shared(self, bucket: str) -> AsyncIterator[None]:
        while bucket in self._closing:  # noqa: ASYNC110  rare: a bucket being deleted
            await asyncio.sleep(0.005)
        self._users[bucket] += 1
        try:
            yield
        finally:
            self._users[bucket] -= 1
            if not self._users[bucket]:
                del self._users[bucket]

    @contextlib.asynccontextmanager
    async def exclusive(self, bucket: str) -> AsyncIterator[None]:
        while bucket in self._closing:  # noqa: ASYNC110  rare: a bucket being deleted
            await asyncio.sleep(0.005)
        self._closing.add(bucket)
        try:
            while self._users[bucket]:  # noqa: ASYNC110  rare: a bucket being deleted
                await asyncio.sleep(0.005)
            yield
        finally:
            self._closing.discard(bucket)


class BlobStore:
    """The core of one blobseer_like blob store: everything its operations share."""

    def __init__(self, config: BlobseerConfig, *, index_root: Path, durable: bool,
                 min_part_size: int) -> None:
        self.config = config
        self.durable = durable
        self.min_part_size = min_part_size
        self.pool = ProviderPool(config, durable=durable)
        self.pins = PinSet()
        self.key_locks = NamedLocks()
        self.upload_locks = NamedLocks()
        self.gate = BucketGate()
        self._index_root = index_root
        self._index: Index | None = None
        self._seq = 0
        self.garbage = asyncio.Event()  # set when a commit may have left garbage
        self.commits = 0
        self.rebuilt: RebuildReport | None = None  # when open found no index

    # -- life cycle (blocking) ---------------------------------------------------------

    def open(self) -> None:
        """Open the providers and the index; an index created just now is rebuilt from
        the providers' records (the gateway's local state was lost or never existed)."""
        self.pool.open()
        try:
            self._index = Index(self._index_root / self.pool.store_id, self.pool.store_id,
                                durable=self.durable)
            if self._index.created:
                self.rebuilt = rebuild_index(self.pool, self._index)
                if self.rebuilt.versions or self.rebuilt.buckets:
                    log.warning("blobseer_like index rebuilt from the providers: %s",
                                self.rebuilt)
            self._seq = max(self._index.seq(), time.time_ns())
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
        self.pool.close()

    @property
    def index(self) -> Index:
        if self._index is None:
            raise BackendError("The blobseer_like store is closed.")
        return self._index

    # -- helpers -----------------------------------------------------------------------

    def next_seq(self) -> int:
        """A sequence number above every one given before (nanoseconds since the epoch)."""
        self._seq = max(self._seq + 1, time.time_ns())
        return self._seq

    async def read_pinned(self, read: Callable[[], T],
                          names: Callable[[T], Iterable[str]]) -> tuple[T, Pin]:
        """``read()`` in a worker thread, with the names it returns pinned: re-read if the
        collector decided in between (see :mod:`backends.blobseer_like.pins`)."""
        while True:
            decisions = self.pins.decisions
            value = await run_blocking(read)
            pin = self.pins.pin(names(value))
            if self.pins.decisions == decisions:
                return value, pin
            self.pins.unpin(pin)

    async def on_replicas(self, replicas: Sequence[str],
                          work: Callable[[Provider], object], operation: str) -> None:
        """Run blocking ``work(provider)`` on every replica provider at once."""
        providers = [self.pool.get(p) for p in replicas]
        with os_errors(operation):
            await asyncio.gather(*(run_blocking(work, p) for p in providers))

    async def write_record(self, record: fmt.Version | fmt.Tombstone) -> None:
        blob = fmt.encode_record(record)
        await self.on_replicas(record.replicas,
                               lambda p: p.write_record(record.record, blob),
                               "write a version record")

    async def require_bucket(self, bucket: str) -> None:
        if await run_blocking(self.index.bucket, bucket) is None:
            raise NoSuchBucket(bucket)

    # -- the commit --------------------------------------------------------------------

    async def commit(self, bucket: str, key: str, build: Builder, *,
                     if_match: str | None = None, if_none_match: str | None = None,
                     also: Batch | None = None) -> fmt.Version | None:
        """Commit the record ``build`` makes as the newest of ``key``, with the index
        changes ``also`` in the same batch; the new current version (None after a
        tombstone). Runs to its end even if the caller is cancelled."""
        return await self.shielded(self._commit(bucket, key, build, if_match, if_none_match,
                                                also))

    def _bucket_and_current(self, bucket: str, key: str) -> fmt.Version | None:
        if self.index.bucket(bucket) is None:
            raise NoSuchBucket(bucket)
        return self.index.current(bucket, key)

    async def _commit(self, bucket: str, key: str, build: Builder, if_match: str | None,
                      if_none_match: str | None, also: Batch | None) -> fmt.Version | None:
        async with self.gate.shared(bucket), self.key_locks.hold((bucket, key)):
            current = await run_blocking(self._bucket_and_current, bucket, key)
            check_write_conditions(bucket, key, current.info() if current else None,
                                   if_match, if_none_match)
            seq = self.next_seq()
            name = fmt.record_name(seq)
            replicas = tuple(p.id for p in self.pool.replicas(name))
            record = build(current, seq, name, replicas)
            if record is None:
                return current
            pin = self.pins.pin([name])
            try:
                await self.write_record(record)
                batch = Batch().set_seq(seq)
                if also is not None:
                    batch.puts.extend(also.puts)
                    batch.deletes.extend(also.deletes)
                if isinstance(record, fmt.Version):
                    batch.put_version(record)
                else:
                    batch.put_tombstone(record)
                await run_blocking(self.index.write, batch)
            finally:
                self.pins.unpin(pin)
            self.commits += 1
            if current is not None:
                self.garbage.set()
            return record if isinstance(record, fmt.Version) else None

    async def shielded(self, work: Awaitable[T]) -> T:
        """Run ``work`` to its end even if the caller is cancelled."""
        return await asyncio.shield(asyncio.ensure_future(work))
