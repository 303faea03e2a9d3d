"""Whether flushes to the backend keep failing: the cache tier's view of a store that
cannot take writes, reported by ``/_squall/health`` (degraded) until a flush succeeds.

Errors no retry can cure (quarantine.PERMANENT_ERRORS) are left out: they concern one
record, not the store, and are reported by the quarantine instead.
"""

from __future__ import annotations

import errno
import time

from backends.core.errors import StorageError
from gateway.cache.quarantine import PERMANENT_ERRORS

#: flushes failing without a success for this long make the store count as failing
FAILING_AFTER_S = 10.0


def describe(exc: BaseException) -> str:
    """What an error says to anyone who reads the health: its type and, for Squall's
    own storage errors (whose messages name no paths, hosts or keys of the store), its
    message; for an OSError, its errno name."""
    name = type(exc).__name__
    if isinstance(exc, StorageError) and str(exc):
        return f"{name}: {exc}"
    if isinstance(exc, OSError) and exc.errno is not None:  # the errno, not the path
        return f"{name} {errno.errorcode.get(exc.errno, exc.errno)}"
    return name


class FlushFailures:
    """Tracks the flushes of one cache tier; ``problem()`` says why the store is failing
    or None. No I/O, no lock: called from the flusher's tasks on one event loop."""

    def __init__(self, *, after_s: float = FAILING_AFTER_S) -> None:
        self._after_s = after_s
        self._since: float | None = None  # first failure after the last success
        self._last = ""

    def failed(self, exc: BaseException) -> None:
        if isinstance(exc, PERMANENT_ERRORS):
            return
        if self._since is None:
            self._since = time.monotonic()
        self._last = describe(exc)

    def succeeded(self) -> None:
        self._since = None

    @property
    def failing(self) -> bool:
        """The last flush failed (for a reason that is not the record's own)."""
        return self._since is not None

    def problem(self, *, pending: bool) -> str | None:
        """Why flushes fail (once they have failed for ``after_s`` without a success,
        and while ``pending`` data waits for them), else None."""
        if self._since is None or not pending:
            return None
        failing = time.monotonic() - self._since
        if failing < self._after_s:
            return None
        return f"flushes to the backend failing for {failing:.0f} s ({self._last})"
