"""ListObjectVersions: current objects and version records merged, grouped, paged.

Both listings come from the backend in key order (records of a key newest first), so
one merge yields every key's versions newest first; stale duplicates left by a crash are
skipped here (see objects.py).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

from backends.core.base import ObjectInfo
from backends.core.internal_keys import VERSION_RECORDS as RECORDS
from backends.core.internal_keys import escape, record_base
from gateway.protocol.listing import AFTER_ALL, closing, prefix_of
from gateway.versioning import ids
from gateway.versioning.objects import VersionedObjects, check_version_id
from gateway.versioning.records import (
    Version,
    client_view,
    current_version,
    is_internal,
    parse_record,
)


@dataclass(frozen=True, slots=True)
class VersionEntry:
    info: ObjectInfo  # as clients see it: key, version id, ETag, size, time
    delete_marker: bool
    is_latest: bool


@dataclass(frozen=True, slots=True)
class VersionPage:
    entries: list[VersionEntry] = field(default_factory=list)
    common_prefixes: list[str] = field(default_factory=list)
    is_truncated: bool = False
    next_key_marker: str | None = None
    next_version_id_marker: str | None = None


async def _current(objects: VersionedObjects, bucket: str, prefix: str, after: str
                   ) -> AsyncGenerator[tuple[ObjectInfo, Version]]:
    async with closing(objects.backend.iter_objects(bucket, prefix=prefix,
                                                    start_after=after)) as listing:
        async for info in listing:
            if is_internal(info.key):
                return  # internal keys sort after every client key that precedes them
            yield info, current_version(info)


async def _records(objects: VersionedObjects, bucket: str, prefix: str, after: str
                   ) -> AsyncGenerator[tuple[ObjectInfo, Version]]:
    async with closing(objects.backend.iter_objects(bucket, prefix=RECORDS + escape(prefix),
                                                    start_after=after)) as listing:
        async for info in listing:
            version = parse_record(info.key)
            if version is not None and version.key.startswith(prefix):
                yield info, version


async def _merged(objects: VersionedObjects, bucket: str, prefix: str, key_after: str,
                  record_after: str, partial_key: str | None
                  ) -> AsyncIterator[VersionEntry]:
    """Every version after the two start positions, key by key, newest first."""
    currents = _current(objects, bucket, prefix, key_after)
    records = _records(objects, bucket, prefix, record_after)
    cur = await anext(currents, None)
    rec = await anext(records, None)
    try:
        while cur is not None or rec is not None:
            key = min(item[1].key for item in (cur, rec) if item is not None)
            group = []
            if cur is not None and cur[1].key == key:
                group.append(cur)
                cur = await anext(currents, None)
            while rec is not None and rec[1].key == key:
                group.append(rec)
                rec = await anext(records, None)
            seen: set[str] = set()
            latest = key != partial_key
            for info, version in group:
                if version.order in seen or (version.null and ids.NULL in seen):
                    continue  # a duplicate or stale null left by a crash
                seen.add(version.order)
                if version.null:
                    seen.add(ids.NULL)
                yield VersionEntry(client_view(info, version, versioned=True),
                                   version.marker, latest)
                latest = False
    finally:
        await currents.aclose()
        await records.aclose()


async def _start(objects: VersionedObjects, bucket: str, key_marker: str,
                 version_id_marker: str) -> tuple[str, str, str | None]:
    """(key_after, record_after, partial key) for the markers of a request."""
    if not key_marker:
        return "", "", None
    if not version_id_marker:
        return key_marker, record_base(key_marker) + AFTER_ALL, None
    check_version_id(version_id_marker)
    order = version_id_marker
    if version_id_marker == ids.NULL:
        found = await objects.find(bucket, key_marker, ids.NULL)
        if found is None:
            return key_marker, record_base(key_marker) + AFTER_ALL, None
        if found.is_current_object:  # every record of the key is older
            return key_marker, record_base(key_marker), key_marker
        order = found.order
    return key_marker, record_base(key_marker) + ids.invert(order) + ".~", key_marker


async def version_page(objects: VersionedObjects, bucket: str, *, prefix: str,
                       delimiter: str, max_keys: int, key_marker: str,
                       version_id_marker: str) -> VersionPage:
    """One page of ListObjectVersions. A common prefix is skipped by restarting both
    listings after it (each layer seeks there; see gateway.protocol.listing.list_page)."""
    await objects.backend.head_bucket(bucket)
    if max_keys <= 0:
        return VersionPage()
    skipped: str | None = None
    if key_marker and (cp := prefix_of(key_marker, prefix, delimiter)) is not None \
            and key_marker.startswith(prefix):
        key_after, record_after, partial = cp + AFTER_ALL, RECORDS + escape(cp) + AFTER_ALL, None
        skipped = cp
    else:
        key_after, record_after, partial = await _start(objects, bucket, key_marker,
                                                        version_id_marker)
    entries: list[VersionEntry] = []
    prefixes: list[str] = []
    last: tuple[str, str | None] = ("", None)
    while True:
        restarted = False
        async with closing(_merged(objects, bucket, prefix, key_after, record_after,
                                   partial)) as listing:
            async for entry in listing:
                cp = prefix_of(entry.info.key, prefix, delimiter)
                if cp is not None and cp == skipped:
                    continue  # past the restart point, same prefix (continues with U+10FFFF)
                if len(entries) + len(prefixes) >= max_keys:
                    return VersionPage(entries, prefixes, True, last[0], last[1])
                if cp is None:
                    entries.append(entry)
                    last = (entry.info.key, entry.info.version_id)
                    continue
                prefixes.append(cp)
                last = (cp, None)
                skipped = cp
                key_after, record_after = cp + AFTER_ALL, RECORDS + escape(cp) + AFTER_ALL
                partial = None
                restarted = True
                break
        if not restarted:
            return VersionPage(entries, prefixes, False, None, None)
