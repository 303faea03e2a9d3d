"""Small payloads kept inside their index record instead of a data file.

A PUT body no larger than ``CacheSettings.inline_max_bytes`` is stored in its RocksDB
record (its durability is the shared WAL sync: no file fsync, no directory fsync) and is
also held in memory, so a read needs no I/O and no worker thread. Its bytes are charged
to a cache volume exactly like a data file (``charge(size)``), so capacity, eviction and
recovery treat both alike. The memory they take is bounded separately: see
:func:`inline_room`.
"""

from __future__ import annotations

#: inline payloads held in memory never exceed this many bytes in total ...
INLINE_MEMORY_CAP = 256 * 1024 * 1024
#: ... nor this fraction (1/n) of the cache capacity
INLINE_CAPACITY_SHARE = 8


class InlineBudget:
    """Bytes of inline payloads alive in memory.

    Payloads count themselves: an :class:`InlinePayload` adds its size when made and
    gives it back when the last record (or reader) holding it is gone, so every way a
    record disappears — overwrite, delete, eviction, volume removal — frees its share.
    Updated on the event loop (and, before the loop uses the index, while it loads).
    """

    __slots__ = ("used",)

    def __init__(self) -> None:
        self.used = 0


class InlinePayload:
    """The bytes of one inline segment, counted in a budget while they live."""

    __slots__ = ("_budget", "data")

    def __init__(self, data: bytes, budget: InlineBudget | None = None) -> None:
        self.data = data
        self._budget = budget
        if budget is not None:
            budget.used += len(data)

    def __del__(self) -> None:
        if self._budget is not None:
            self._budget.used -= len(self.data)

    def __len__(self) -> int:
        return len(self.data)


def inline_limit(capacity: int) -> int:
    """The memory inline payloads may take with ``capacity`` bytes of cache volumes."""
    return min(INLINE_MEMORY_CAP, capacity // INLINE_CAPACITY_SHARE)


def inline_room(budget: InlineBudget, size: int, capacity: int) -> bool:
    """Whether a new inline payload of ``size`` bytes fits the memory budget."""
    return budget.used + size <= inline_limit(capacity)
