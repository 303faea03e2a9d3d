"""Garbage collection: chunks no version or part refers to, dead records, orphans.

One pass (never two at once) runs alongside traffic:

1. list the chunk files, record files and upload directories of every provider;
2. open a pin epoch, scan the index for what is referenced, close the epoch: anything
   listed, unreferenced and not pinned during the epoch is garbage (see pins.py);
3. remove garbage chunks, orphan records (written by commits that never reached the
   index) and superseded records, then tombstones left alone (every older record of
   their key is gone, durably, so a rebuild cannot resurrect the key).

A crash at any point leaves only garbage the next pass removes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from backends.blobseer_like.index import Batch, RecordEntry
from backends.blobseer_like.provider import Provider
from backends.blobseer_like.store import BlobStore
from backends.core.blocking import run_blocking

log = logging.getLogger("squall.blobseer")


@dataclass
class GcReport:
    chunks: int = 0  # chunk files removed
    records: int = 0  # version records and tombstones removed
    uploads: int = 0  # upload directories and part records removed
    seconds: float = 0.0


@dataclass
class _Listing:
    chunks: dict[str, set[str]] = field(default_factory=dict)  # provider -> chunk ids
    records: dict[str, set[str]] = field(default_factory=dict)  # provider -> record names
    uploads: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # -> id -> files


@dataclass
class _Scan:
    chunks: set[str] = field(default_factory=set)  # referenced chunk ids
    records: set[str] = field(default_factory=set)  # record names the index knows
    dead: list[RecordEntry] = field(default_factory=list)  # superseded records
    lone_tombstones: list[RecordEntry] = field(default_factory=list)
    upload_files: dict[str, set[str]] = field(default_factory=dict)  # live id -> file names


class Collector:
    """Runs passes on demand and, every ``interval`` seconds, when garbage may exist."""

    def __init__(self, store: BlobStore, interval: float) -> None:
        self._store = store
        self._interval = interval
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.passes = 0
        self.total = GcReport()

    def start(self) -> None:
        if self._interval > 0 and self._task is None:
            self._task = asyncio.ensure_future(self._loop())

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
        async with self._lock:
            pass  # a pass in progress ends first

    async def _loop(self) -> None:
        first = True
        while True:
            await asyncio.sleep(self._interval)
            if first or self._store.garbage.is_set():
                first = False
                try:
                    await self.run()
                except Exception:  # logged; the next pass retries
                    log.exception("blobseer_like garbage collection failed")

    async def run(self) -> GcReport:
        """One complete pass."""
        async with self._lock:
            self._store.garbage.clear()
            started = time.monotonic()
            report = await self._pass()
            report.seconds = time.monotonic() - started
            self.passes += 1
            self.total.chunks += report.chunks
            self.total.records += report.records
            self.total.uploads += report.uploads
            if report.chunks or report.records or report.uploads:
                log.info("blobseer_like gc: %s", report)
            return report

    def _list(self) -> _Listing:
        listing = _Listing()
        for provider in self._store.pool.by_id.values():
            listing.chunks[provider.id] = set(provider.chunk_ids())
            listing.records[provider.id] = set(provider.record_names())
            listing.uploads[provider.id] = {
                upload_id: provider.upload_files(upload_id)
                for upload_id in provider.upload_ids()}
        return listing

    def _scan(self) -> _Scan:
        index = self._store.index
        scan = _Scan()
        for version in index.iter_versions():
            scan.chunks.update(c.id for c in version.chunks)
        by_key: dict[tuple[str, str], list[RecordEntry]] = defaultdict(list)
        for entry in index.records():
            by_key[(entry.bucket, entry.key)].append(entry)
            scan.records.add(entry.record)
        for entries in by_key.values():
            scan.dead.extend(entries[:-1])
            if len(entries) == 1 and entries[0].kind == "tombstone":
                scan.lone_tombstones.append(entries[0])
        for upload in index.all_uploads():
            scan.upload_files[upload.upload_id] = set()
        for part in index.iter_parts():
            scan.chunks.update(c.id for c in part.chunks)
            scan.upload_files.setdefault(part.upload_id, set()).add(part.record)
        return scan

    async def _pass(self) -> GcReport:
        store = self._store
        listing = await run_blocking(self._list)
        store.pins.open_epoch()
        try:
            scan = await run_blocking(self._scan)
        finally:
            spared = store.pins.close_epoch()
        report = GcReport()
        removals: list[tuple[Provider, str, str]] = []  # (provider, what, name)
        for provider_id, ids in listing.chunks.items():
            provider = store.pool.get(provider_id)
            removals.extend((provider, "chunk", c) for c in ids - scan.chunks - spared)
        for provider_id, names in listing.records.items():
            provider = store.pool.get(provider_id)
            removals.extend((provider, "record", n) for n in names - scan.records - spared)
        for provider_id, uploads in listing.uploads.items():
            provider = store.pool.get(provider_id)
            for upload_id, files in uploads.items():
                if upload_id in spared:
                    continue
                if upload_id not in scan.upload_files:
                    removals.append((provider, "upload", upload_id))
                    continue
                stale = {f for f in files if f.startswith("part-")} \
                    - scan.upload_files[upload_id] - spared
                removals.extend((provider, "part", f"{upload_id}/{f}") for f in stale)
        for entry in scan.dead:
            removals.extend((store.pool.get(p), "record", entry.record)
                            for p in entry.replicas if p in store.pool.by_id)
        counts = await run_blocking(_remove, removals)
        report.chunks = counts["chunk"]
        report.records = counts["record"]
        report.uploads = counts["upload"] + counts["part"]
        if scan.dead:
            batch = Batch()
            for entry in scan.dead:
                batch.forget_record(entry)
            await run_blocking(store.index.write, batch)
        # Older records are durably gone (each unlink was followed by a directory fsync):
        # tombstones standing alone can go too.
        if scan.lone_tombstones:
            tombs = [(store.pool.get(p), "record", e.record) for e in scan.lone_tombstones
                     for p in e.replicas if p in store.pool.by_id]
            report.records += (await run_blocking(_remove, tombs))["record"]
            batch = Batch()
            for entry in scan.lone_tombstones:
                batch.forget_record(entry)
            await run_blocking(store.index.write, batch)
        return report


def _remove(removals: Iterable[tuple[Provider, str, str]]) -> dict[str, int]:
    """Blocking: remove files; raises on the first failure (the pass is retried later)."""
    counts: dict[str, int] = defaultdict(int)
    for provider, what, name in removals:
        if what == "chunk":
            provider.delete_chunk(name)
        elif what == "record":
            provider.unlink(provider.record_path(name))
        elif what == "upload":
            provider.remove_upload_dir(name)
        else:
            upload_id, _, file = name.partition("/")
            provider.unlink(provider.upload_dir(upload_id) / file)
        counts[what] += 1
    return counts
