"""Pins: what operations in flight are about to reference, kept safe from the collector.

Every name (chunk id, record name, upload id) an operation writes or starts to reference
is pinned before the file is created or the reference is read, and unpinned once the
index refers to it (or the operation gave up). The garbage collector opens an *epoch*
before it scans the index: names pinned at that moment or at any time until its
decision are spared, and every decision bumps :attr:`PinSet.decisions`. An operation that
reads references in a worker thread and pins them afterwards re-reads them if a
decision happened in between (:meth:`BlobStore.read_pinned`), so a reference read before a
decision is never used after the collector removed its target. Everything here runs
on the event loop (no locks needed, no I/O).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


class Pin:
    """The names one operation pinned; released once with :meth:`PinSet.unpin`."""

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: list[str] = []


class PinSet:
    """Pinned names with counts, and the collector's epoch."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._epoch: set[str] | None = None
        self.decisions = 0

    def pin(self, names: Iterable[str], into: Pin | None = None) -> Pin:
        pin = into if into is not None else Pin()
        for name in names:
            self._counts[name] += 1
            pin.names.append(name)
            if self._epoch is not None:
                self._epoch.add(name)
        return pin

    def unpin(self, pin: Pin) -> None:
        names, pin.names = pin.names, []
        for name in names:
            left = self._counts[name] - 1
            if left > 0:
                self._counts[name] = left
            else:
                del self._counts[name]

    def __contains__(self, name: str) -> bool:
        return name in self._counts

    def open_epoch(self) -> None:
        """Start remembering every name pinned from now on (plus those pinned now)."""
        self._epoch = set(self._counts)

    def close_epoch(self) -> set[str]:
        """The names to spare: pinned at :meth:`open_epoch` or since. Counts a decision."""
        spared, self._epoch = self._epoch or set(), None
        spared.update(self._counts)
        self.decisions += 1
        return spared
