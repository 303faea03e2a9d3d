"""Flushes the backend refuses for good: kept, reported, retried rarely.

A flush that fails with an error the backend will give again whatever the timing (the
bucket was deleted behind Squall's back, the backend refuses the key or the size) is
*quarantined* after a few attempts: its record stays DIRTY in the index (acknowledged
data is never dropped), but it is retried only every ``retry_s``; ``wait_flushed`` (and
so ``squall sync``) retries it once at once and, if it fails again, reports it instead
of waiting for it; ``/_squall/status`` and the metrics show it. A newer write of the key, or a successful
retry, ends the quarantine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from backends.core.errors import (
    EntityTooLarge,
    InvalidBucketName,
    InvalidKey,
    KeyTooLong,
    NoSuchBucket,
)

BK = tuple[str, str]

#: errors that no retry can cure
PERMANENT_ERRORS: tuple[type[Exception], ...] = (
    NoSuchBucket, InvalidBucketName, InvalidKey, KeyTooLong, EntityTooLarge)


@dataclass(frozen=True, slots=True)
class QuarantinedFlush:
    """One record whose flush the backend refuses."""

    bucket: str
    key: str
    seq: int
    error: str
    since: float
    attempts: int

    def describe(self) -> dict[str, object]:
        return {"bucket": self.bucket, "key": self.key, "error": self.error,
                "since": self.since, "attempts": self.attempts}


class Quarantine:
    """The quarantined records, by key (a record is identified by its sequence number).

    ``current(bk)`` gives the sequence number of the key's unflushed record (None: none),
    so a record replaced by a newer write leaves the quarantine by itself.
    """

    def __init__(self, current: Callable[[BK], int | None], *, after_attempts: int = 3,
                 retry_s: float = 300.0) -> None:
        self.after_attempts = after_attempts
        self.retry_s = retry_s
        self._current = current
        self._held: dict[BK, QuarantinedFlush] = {}
        self._trial: set[BK] = set()  # retried now (by a sync): not held until it fails

    def failed(self, bk: BK, seq: int, exc: Exception, attempts: int) -> float | None:
        """Record a failed flush; the retry delay if it is (now) quarantined, else None."""
        if not isinstance(exc, PERMANENT_ERRORS) or attempts < self.after_attempts:
            return None
        self._trial.discard(bk)
        held = self._held.get(bk)
        since = held.since if held is not None and held.seq == seq else time.time()
        self._held[bk] = QuarantinedFlush(bk[0], bk[1], seq, f"{type(exc).__name__}: {exc}",
                                          since, attempts)
        return self.retry_s

    def flushed(self, bk: BK) -> None:
        """The key's record reached the backend (or was replaced)."""
        self._held.pop(bk, None)
        self._trial.discard(bk)

    def retry(self, bucket: str | None) -> list[BK]:
        """Put the quarantined records (of ``bucket``) on trial: they count as pending
        again until their next attempt fails. Returns their keys (to retry at once)."""
        keys = [(q.bucket, q.key) for q in self.items(bucket)]
        self._trial.update(keys)
        return keys

    def holds(self, bk: BK, seq: int) -> bool:
        """Whether the record ``seq`` of ``bk`` is quarantined (and not on trial)."""
        held = self._held.get(bk)
        return held is not None and held.seq == seq and bk not in self._trial

    def items(self, bucket: str | None = None) -> list[QuarantinedFlush]:
        """The records still quarantined (in ``bucket``), oldest first."""
        for bk, held in list(self._held.items()):
            if self._current(bk) != held.seq:
                del self._held[bk]
        return sorted((q for q in self._held.values() if bucket is None or q.bucket == bucket),
                      key=lambda q: q.since)
