"""Rebuilding the local index from the records on the providers, and checking a store.

The providers hold everything: bucket records, every version record and tombstone
(replicated), upload and part records. The newest record of a key (by sequence number)
decides whether it exists and what it is; older ones stay indexed so that the garbage
collector removes them. Blocking throughout (fsck and the store's open call it).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field

from backends.blobseer_like import format as fmt
from backends.blobseer_like.index import Batch, Index
from backends.blobseer_like.pool import ProviderPool

_BATCH = 1000


@dataclass
class RebuildReport:
    buckets: int = 0
    versions: int = 0  # keys with a current version
    records: int = 0  # record files indexed (all versions and tombstones, deduplicated)
    uploads: int = 0
    parts: int = 0
    seq: int = 0
    unreadable: list[str] = field(default_factory=list)  # files skipped, with the reason


@dataclass
class _Found:
    buckets: dict[str, tuple[int, set[str]]] = field(default_factory=dict)
    records: dict[str, fmt.Version | fmt.Tombstone] = field(default_factory=dict)
    uploads: dict[str, fmt.Upload] = field(default_factory=dict)
    parts: dict[tuple[str, int], fmt.Part] = field(default_factory=dict)


def _read(path: os.PathLike[str], report: RebuildReport) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        report.unreadable.append(f"{path}: {exc.strerror}")
        return None


def _collect(pool: ProviderPool, report: RebuildReport) -> _Found:
    found = _Found()
    for provider in pool.by_id.values():
        for bucket in provider.bucket_names():
            blob = _read(provider.bucket_path(bucket), report)
            if blob is None:
                continue
            try:
                name, created = fmt.decode_bucket(blob)
            except fmt.FormatError as exc:
                report.unreadable.append(f"{provider.bucket_path(bucket)}: {exc}")
                continue
            earliest, holders = found.buckets.get(name, (created, set()))
            found.buckets[name] = (min(earliest, created), holders | {provider.id})
        for name in provider.record_names():
            path = provider.record_path(name)
            blob = _read(path, report)
            try:
                record = fmt.decode_record(blob) if blob is not None else None
            except fmt.FormatError as exc:
                report.unreadable.append(f"{path}: {exc}")
                continue
            if isinstance(record, fmt.Version | fmt.Tombstone):
                found.records[record.record] = record
        for upload_id in provider.upload_ids():
            _collect_upload(provider.upload_dir(upload_id), found, report)
    return found


def _collect_upload(directory: os.PathLike[str], found: _Found, report: RebuildReport) -> None:
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        report.unreadable.append(f"{directory}: {exc.strerror}")
        return
    if fmt.UPLOAD_RECORD not in names:
        return  # being removed: its upload record goes first
    records = []
    for name in names:
        path = os.path.join(directory, name)
        blob = _read(path, report)  # type: ignore[arg-type]
        try:
            records.append(fmt.decode_record(blob) if blob is not None else None)
        except fmt.FormatError as exc:
            report.unreadable.append(f"{path}: {exc}")
    for record in records:
        if isinstance(record, fmt.Upload):
            found.uploads[record.upload_id] = record
        elif isinstance(record, fmt.Part):
            known = found.parts.get((record.upload_id, record.part_number))
            if known is None or known.seq < record.seq:
                found.parts[(record.upload_id, record.part_number)] = record


def rebuild_index(pool: ProviderPool, index: Index) -> RebuildReport:
    """Replace the index's contents with what the providers' records say."""
    report = RebuildReport()
    found = _collect(pool, report)
    index.clear()
    batch = Batch()

    def flush(force: bool = False) -> None:
        nonlocal batch
        if force or len(batch.puts) + len(batch.deletes) >= _BATCH:
            index.write(batch)
            batch = Batch()

    by_key: dict[tuple[str, str], list[fmt.Version | fmt.Tombstone]] = defaultdict(list)
    for record in found.records.values():
        by_key[(record.bucket, record.key)].append(record)
        report.seq = max(report.seq, record.seq)
    buckets = dict(found.buckets)
    for (bucket, _key), records in by_key.items():
        records.sort(key=lambda r: r.seq)
        for record in records[:-1]:
            batch.add_record(record)  # superseded: for the collector to remove
            report.records += 1
            flush()
        newest = records[-1]
        if isinstance(newest, fmt.Version):
            batch.put_version(newest)
            report.versions += 1
            if bucket not in buckets:
                # Objects outlived their bucket's records: the bucket is restored.
                buckets[bucket] = (newest.mtime_ns, set())
        else:
            batch.put_tombstone(newest)
        report.records += 1
        flush()
    for bucket, (created, holders) in sorted(buckets.items()):
        batch.put_bucket(bucket, created, sorted(holders))
        report.buckets += 1
    for upload in found.uploads.values():
        if upload.bucket in buckets:
            batch.put_upload(upload)
            report.uploads += 1
            flush()
    for (upload_id, _number), part in found.parts.items():
        if upload_id in found.uploads and found.uploads[upload_id].bucket in buckets:
            batch.put_part(part)
            report.parts += 1
            report.seq = max(report.seq, part.seq)
            flush()
    batch.set_seq(report.seq)
    flush(force=True)
    return report
