"""``squall fsck``: check a store (optionally rebuilding its index, collecting garbage).

Run it while no gateway uses the store (the providers' locks enforce that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from backends.blobseer_like import format as fmt
from backends.blobseer_like.backend import BlobseerBackend
from backends.blobseer_like.config import parse_config
from backends.blobseer_like.gc import GcReport
from backends.blobseer_like.index import RecordEntry
from backends.blobseer_like.rebuild import RebuildReport, rebuild_index
from backends.blobseer_like.store import BlobStore
from backends.core.blocking import run_blocking


@dataclass
class FsckReport:
    rebuilt: RebuildReport | None = None
    versions: int = 0
    parts: int = 0
    chunks: int = 0  # chunk references checked
    missing: list[str] = field(default_factory=list)
    corrupted: list[str] = field(default_factory=list)
    under_replicated: list[str] = field(default_factory=list)  # records with a lost copy
    gc: GcReport | None = None

    @property
    def ok(self) -> bool:
        return not (self.missing or self.corrupted or self.under_replicated
                    or (self.rebuilt is not None and self.rebuilt.unreadable))

    def lines(self) -> list[str]:
        out = []
        if self.rebuilt is not None:
            r = self.rebuilt
            out.append(f"index rebuilt: {r.buckets} buckets, {r.versions} objects, "
                       f"{r.records} records, {r.uploads} uploads ({r.parts} parts)")
            out.extend(f"unreadable: {u}" for u in r.unreadable)
        out.append(f"checked {self.versions} objects and {self.parts} parts: "
                   f"{self.chunks} chunk references")
        out.extend(f"missing: {m}" for m in self.missing)
        out.extend(f"corrupted: {c}" for c in self.corrupted)
        out.extend(f"under-replicated record: {u}" for u in self.under_replicated)
        if self.gc is not None:
            out.append(f"garbage removed: {self.gc.chunks} chunks, {self.gc.records} records, "
                       f"{self.gc.uploads} upload files")
        out.append("store is consistent" if self.ok else "store has problems")
        return out


def _check_chunks(store: BlobStore, owner: str, chunks: tuple[fmt.ChunkRef, ...],
                  verify: bool, report: FsckReport) -> None:
    for ref in chunks:
        report.chunks += 1
        where = f"{owner}: chunk {ref.id} on provider {ref.provider}"
        provider = store.pool.by_id.get(ref.provider)
        if provider is None:
            report.missing.append(f"{where} (unknown provider)")
            continue
        try:
            size = provider.chunk_path(ref.id).stat().st_size
        except FileNotFoundError:
            report.missing.append(where)
            continue
        if size != fmt.CHUNK_HEADER.size + ref.size:
            report.corrupted.append(f"{where} (size {size})")
        elif verify and (problem := provider.verify_chunk(ref.id)) is not None:
            report.corrupted.append(f"{where} ({problem})")


def check(store: BlobStore, *, verify_data: bool) -> FsckReport:
    """Blocking: every chunk every version and part refers to exists with the right size
    (and checksum, with ``verify_data``); the record deciding each key has all its
    replicas (superseded ones are garbage, possibly half removed)."""
    report = FsckReport()
    index = store.index
    for version in index.iter_versions():
        report.versions += 1
        _check_chunks(store, f"{version.bucket}/{version.key}", version.chunks, verify_data,
                      report)
    for part in index.iter_parts():
        report.parts += 1
        _check_chunks(store, f"upload {part.upload_id} part {part.part_number}", part.chunks,
                      verify_data, report)
    latest: dict[tuple[str, str], RecordEntry] = {}
    for entry in index.records():  # by key, ascending seq: the last one decides the key
        latest[(entry.bucket, entry.key)] = entry
    for entry in latest.values():
        for provider_id in entry.replicas:
            provider = store.pool.by_id.get(provider_id)
            if provider is None or not provider.record_path(entry.record).exists():
                report.under_replicated.append(
                    f"{entry.bucket}/{entry.key} record {entry.record} on {provider_id}")
    return report


async def fsck(args: str, data_dir: Path, *, rebuild: bool = False, verify_data: bool = False,
               collect: bool = False) -> FsckReport:
    """Open the store ``blobseer_like:<args>`` (index under ``data_dir``) and check it."""
    backend = BlobseerBackend(parse_config(args), index_root=data_dir / "blobseer")
    await run_blocking(backend.open)
    try:
        store = backend.store
        rebuilt = store.rebuilt  # the index was missing: rebuilt on open
        if rebuild and rebuilt is None:
            rebuilt = await run_blocking(rebuild_index, store.pool, store.index)
        report = await run_blocking(check, store, verify_data=verify_data)
        report.rebuilt = rebuilt
        if collect:
            report.gc = await backend.collect_garbage()
        return report
    finally:
        await backend.aclose()
