"""S3 listing, written once for every backend: delimiter grouping and pagination.

Backends yield objects in key order; this module turns that stream into pages of
objects and common prefixes exactly as ListObjects / ListObjectsV2 define them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from backends.core.base import ObjectInfo, UploadInfo

T = TypeVar("T")

# Sorts after every key that starts with a given prefix (keys are valid UTF-8).
AFTER_ALL = "\U0010ffff"


@dataclass(frozen=True, slots=True)
class ListPage:
    objects: list[ObjectInfo] = field(default_factory=list)
    common_prefixes: list[str] = field(default_factory=list)
    is_truncated: bool = False
    next_marker: str | None = None  # last key or common prefix returned, when truncated


@dataclass(frozen=True, slots=True)
class UploadPage:
    uploads: list[UploadInfo] = field(default_factory=list)
    common_prefixes: list[str] = field(default_factory=list)
    is_truncated: bool = False
    next_key_marker: str | None = None
    next_upload_id_marker: str | None = None


@contextlib.asynccontextmanager
async def closing(items: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """Close a backend listing however the page ends (listings may hold fds)."""
    try:
        yield items
    finally:
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            await aclose()


def prefix_of(key: str, prefix: str, delimiter: str) -> str | None:
    if not delimiter:
        return None
    at = key.find(delimiter, len(prefix))
    return key[: at + len(delimiter)] if at >= 0 else None


async def list_page(iterate: Callable[[str], AsyncIterator[ObjectInfo]], *, prefix: str,
                    delimiter: str, max_keys: int, after: str) -> ListPage:
    """One page of keys/prefixes after ``after``; ``iterate(start_after)`` opens a listing.

    A common prefix is skipped by opening a new listing after ``prefix + U+10FFFF``: every
    layer seeks to it (bisection, a RocksDB seek, a pruned tree walk, ``StartAfter``), so
    the keys under a prefix are never walked. The few keys that sort after that point
    and still share the prefix (they continue with U+10FFFF) are passed over one by one.
    """
    objects: list[ObjectInfo] = []
    prefixes: list[str] = []
    last = ""
    start = after
    if max_keys <= 0:
        return ListPage()
    # A marker that is a common prefix (returned by an earlier page) skips that prefix.
    skipped = None
    if after.startswith(prefix) and prefix_of(after, prefix, delimiter) == after:
        start = after + AFTER_ALL
        skipped = after
    while True:
        restarted = False
        async with closing(iterate(start)) as listing:
            async for info in listing:
                cp = prefix_of(info.key, prefix, delimiter)
                if cp is not None and cp == skipped:
                    continue  # a key past the restart point that has the same prefix
                if len(objects) + len(prefixes) >= max_keys:
                    return ListPage(objects, prefixes, True, last or None)
                if cp is None:
                    objects.append(info)
                    last = info.key
                    continue
                prefixes.append(cp)
                last = skipped = cp
                start = cp + AFTER_ALL  # skip the whole prefix
                restarted = True
                break
        if not restarted:
            return ListPage(objects, prefixes, False, None)


async def upload_page(uploads: AsyncIterator[UploadInfo], *, prefix: str, delimiter: str,
                      max_uploads: int, key_marker: str, upload_id_marker: str) -> UploadPage:
    """One page of ListMultipartUploads (uploads are sorted by key, initiated, id)."""
    page: list[UploadInfo] = []
    prefixes: list[str] = []
    async with closing(uploads) as listing:
        async for up in listing:
            if key_marker:
                if up.key < key_marker:
                    continue
                if up.key == key_marker and (not upload_id_marker
                                             or up.upload_id <= upload_id_marker):
                    continue
            cp = prefix_of(up.key, prefix, delimiter)
            if cp is not None and prefixes and prefixes[-1] == cp:
                continue
            if len(page) + len(prefixes) >= max_uploads:
                last_key = page[-1].key if page else (prefixes[-1] if prefixes else "")
                last_id = page[-1].upload_id if page else ""
                return UploadPage(page, prefixes, True, last_key, last_id)
            if cp is not None:
                prefixes.append(cp)
            else:
                page.append(up)
    return UploadPage(page, prefixes, False, None, None)
