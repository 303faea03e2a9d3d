"""Laying the cache's records over a backend's sorted listing.

:func:`cache_overlay` walks one bucket's records from a bisection point in pages (a
:class:`~gateway.cache.records.Cursor` resumes after the last key handed out, so records
may change between pages) and yields to the event loop between pages. :func:`merge_sorted`
merges such an overlay with the backend's listing. Both do a bounded amount of work
between two suspensions, however many records are skipped or hidden.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from backends.core.base import ObjectInfo

if TYPE_CHECKING:
    from gateway.cache.store import CacheStore

T = TypeVar("T")
Pairs = AsyncIterable[tuple[Any, T | None]] | Iterable[tuple[Any, T | None]]

_FIRST_PAGE = 16  # a listing restarted past a common prefix often needs one key
_MAX_PAGE = 1024
_STEPS_PER_YIELD = 4096


async def cache_overlay(store: CacheStore, bucket: str, prefix: str, start_after: str
                        ) -> AsyncIterator[tuple[str, ObjectInfo | None]]:
    """``(key, info)`` of the cached records of ``bucket`` under ``prefix`` after
    ``start_after``, in key order; ``info`` is None for a tombstone. O(log n) to start,
    O(1) per record; pages grow from 16 to 1024 records."""
    records = store.records
    cursor = records.cursor(bucket, prefix, start_after)
    size = _FIRST_PAGE
    try:
        while True:
            page, more = records.page(cursor, size)
            for entry in page:
                yield entry.key, None if entry.deleted else entry.info()
            if not more:
                return
            size = min(size * 2, _MAX_PAGE)
            await asyncio.sleep(0)
    finally:
        records.release(cursor)


async def _pairs(overlay: Iterable[tuple[Any, T | None]]) -> AsyncIterator[tuple[Any, T | None]]:
    for pair in overlay:
        yield pair


async def merge_sorted(overlay: Pairs[T], inner: AsyncIterator[T],
                       sort_key: Callable[[T], Any]) -> AsyncGenerator[T, None]:
    """Yield ``inner`` (ascending by ``sort_key``) merged with ``overlay`` (ascending
    ``(sort key, item)`` pairs, a sequence or an async iterable). An overlay pair replaces
    the inner item with the same sort key; an overlay item ``None`` (a tombstone) hides
    it. The overlay is started before ``inner`` is read. Both are closed."""
    sentinel: Any = object()
    pairs: AsyncIterator[tuple[Any, T | None]] = (
        aiter(overlay) if isinstance(overlay, AsyncIterable) else _pairs(overlay))
    steps = 0
    try:
        over = await anext(pairs, sentinel)
        nxt: Any = await anext(inner, sentinel)
        while over is not sentinel or nxt is not sentinel:
            steps += 1
            if steps >= _STEPS_PER_YIELD:  # e.g. a run of tombstones hiding backend keys
                steps = 0
                await asyncio.sleep(0)
            if over is not sentinel and (nxt is sentinel or over[0] <= sort_key(nxt)):
                okey, item = over
                if nxt is not sentinel and okey == sort_key(nxt):
                    nxt = await anext(inner, sentinel)
                over = await anext(pairs, sentinel)
                if item is not None:
                    yield item
            else:
                yield nxt
                nxt = await anext(inner, sentinel)
    finally:
        for stream in (pairs, inner):
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
