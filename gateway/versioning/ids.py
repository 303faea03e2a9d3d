"""Version ids: unique across replicas and ordered by the time they were made.

An id is 24 lowercase hex digits: 14 of microseconds since the epoch, then 10 random
(fixed per process and counter-free, so two replicas never make the same id). Within a
process the time part strictly increases, so ids sort in the order they were issued.
The stored form of an id in a version record is its *inverse* (every digit d -> f-d),
so an ascending listing returns the newest version first.
"""

from __future__ import annotations

import re
import secrets
import threading
import time

NULL = "null"
_TIME_DIGITS = 14
_ID_RE = re.compile(r"^[0-9a-f]{24}$")
_INVERT = str.maketrans("0123456789abcdef", "fedcba9876543210")


class VersionIds:
    """Issues strictly increasing version ids for this process."""

    def __init__(self) -> None:
        self._suffix = secrets.token_hex(5)
        self._last = 0
        self._lock = threading.Lock()

    def new(self, at: float | None = None) -> str:
        micros = int((time.time() if at is None else at) * 1_000_000)
        with self._lock:
            micros = max(micros, self._last + 1)
            self._last = micros
        return f"{micros:0{_TIME_DIGITS}x}{self._suffix}"


def at_time(seconds: float) -> str:
    """The order id of something made at ``seconds`` without an id of its own."""
    return f"{int(seconds * 1_000_000):0{_TIME_DIGITS}x}" + "0" * 10


def is_version_id(value: str) -> bool:
    return bool(_ID_RE.match(value))


def timestamp(version_id: str) -> float:
    """Seconds since the epoch at which ``version_id`` was issued."""
    return int(version_id[:_TIME_DIGITS], 16) / 1_000_000


def invert(version_id: str) -> str:
    """The stored (descending) form of an id; its own inverse."""
    return version_id.translate(_INVERT)
