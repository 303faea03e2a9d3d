"""Merging a snapshot of cache records into a backend's sorted listing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


async def merge_sorted(overlay: Sequence[tuple[Any, T | None]], inner: AsyncIterator[T],
                       sort_key: Callable[[T], Any]) -> AsyncIterator[T]:
    """Yield ``inner`` (ascending by ``sort_key``) merged with ``overlay`` (ascending
    ``(sort key, item)`` pairs). An overlay pair replaces the inner item with the same
    sort key; an overlay item ``None`` (a tombstone) hides it. ``inner`` is closed."""
    sentinel = object()
    try:
        nxt: Any = await anext(inner, sentinel)
        i = 0
        while i < len(overlay) or nxt is not sentinel:
            if i < len(overlay) and (nxt is sentinel or overlay[i][0] <= sort_key(nxt)):
                okey, item = overlay[i]
                i += 1
                if nxt is not sentinel and okey == sort_key(nxt):
                    nxt = await anext(inner, sentinel)
                if item is not None:
                    yield item
            else:
                yield nxt
                nxt = await anext(inner, sentinel)
    finally:
        aclose = getattr(inner, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
