"""How fast a client must send a request body and take a response body (docs/security.md,
"Slow clients").

Pure bookkeeping on a clock the caller reads, so that the HTTP protocol
(:mod:`gateway.http.limits`) only feeds it byte counts and asks for a verdict when a timer
fires; time during which the server itself does not read (backpressure) or has nothing to
send is never counted against the client.

* :class:`BodyPace`: a request body must keep ``min_rate`` over every window of
  ``grace_s`` seconds after the first one, and arrive whole within
  ``deadline_s + length / deadline_rate`` (``length``: the declared length, or what came so
  far when none is declared).
* :class:`StallMeter`: a response whose writes wait on the client must be taken at
  ``min_rate`` over the time spent waiting, measured in windows of ``grace_s``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PaceLimits:
    """Slow-client limits; a rate or deadline of ``None`` turns its rule off (the
    defaults are the settings' limits section's)."""

    min_rate: float | None
    grace_s: float
    deadline_s: float | None
    deadline_rate: float | None

    @property
    def enabled(self) -> bool:
        return self.min_rate is not None or self.deadline_s is not None


class Verdict(enum.Enum):
    """What a check found."""

    OK = 1
    TOO_SLOW = 2  # below the minimum rate over a window
    TOO_LATE = 3  # past the body's deadline


class BodyPace:
    """The progress of one request body against :class:`PaceLimits`."""

    __slots__ = ("_declared", "_limits", "_mark_active", "_mark_bytes", "_start")

    def __init__(self, limits: PaceLimits, start: float, declared: int) -> None:
        """``start``: when the body became due; ``declared``: its stated length (0 when
        unknown, e.g. chunked)."""
        self._limits = limits
        self._start = start
        self._declared = declared
        self._mark_active = limits.grace_s  # the current window's start (client time)
        self._mark_bytes = -1  # bytes at the window's start; -1: not reached yet

    def check(self, now: float, received: int, paused_s: float) -> tuple[Verdict, float]:
        """The verdict at ``now`` (``received`` bytes so far, ``paused_s`` seconds during
        which the server did not read), and the seconds until the next check is due."""
        limits = self._limits
        active = now - self._start - paused_s
        due = float("inf")
        if limits.deadline_s is not None:
            allowed = limits.deadline_s
            if limits.deadline_rate is not None:
                allowed += max(self._declared, received) / limits.deadline_rate
            if active > allowed:
                return Verdict.TOO_LATE, 0.0
            due = allowed - active
        if limits.min_rate is not None:
            if active < self._mark_active:
                due = min(due, self._mark_active - active)
            elif self._mark_bytes < 0:  # the grace period is over: the first window opens
                self._mark_active, self._mark_bytes = active, received
                due = min(due, limits.grace_s)
            else:
                window = active - self._mark_active
                if window >= limits.grace_s:
                    if received - self._mark_bytes < limits.min_rate * window:
                        return Verdict.TOO_SLOW, 0.0
                    self._mark_active, self._mark_bytes = active, received
                    window = 0.0
                due = min(due, limits.grace_s - window)
        return Verdict.OK, max(due, 0.05)


class StallMeter:
    """The time a response's writes waited on the client, and what it took meanwhile."""

    __slots__ = ("_blocked_at", "_bytes", "_limits", "_stalled_s")

    def __init__(self, limits: PaceLimits) -> None:
        self._limits = limits
        self._blocked_at: float | None = None
        self._stalled_s = 0.0  # waiting time in the current window (ended spans)
        self._bytes = 0  # bytes the client took in the current window

    @property
    def blocked(self) -> bool:
        return self._blocked_at is not None

    def block(self, now: float) -> None:
        """Writes wait for the client from ``now``."""
        if self._blocked_at is None:
            self._blocked_at = now

    def unblock(self, now: float, taken: int) -> None:
        """The client took ``taken`` bytes and writes may go on."""
        if self._blocked_at is not None:
            self._stalled_s += now - self._blocked_at
            self._blocked_at = None
        self._bytes += taken

    def took(self, taken: int) -> None:
        """The client took ``taken`` more bytes (writes were not waiting)."""
        self._bytes += taken

    def check(self, now: float, pending: int) -> tuple[bool, float]:
        """(too slow, seconds until the next check while writes still wait): ``pending``
        is what the client took of the current span so far."""
        limits = self._limits
        stalled = self._stalled_s
        if self._blocked_at is not None:
            stalled += now - self._blocked_at
        if limits.min_rate is None:
            return False, float("inf")
        if stalled < limits.grace_s:
            return False, max(limits.grace_s - stalled, 0.05)
        if self._bytes + pending < limits.min_rate * stalled:
            return True, 0.0
        # A new window from now on.
        self._stalled_s, self._bytes = 0.0, -pending
        if self._blocked_at is not None:
            self._blocked_at = now
        return False, limits.grace_s
