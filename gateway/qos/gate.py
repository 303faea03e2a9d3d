"""Enforcement: token buckets that delay a request (or a flush) until its class has the
tokens, with a bound beyond which a request is refused with 503 SlowDown.

A reservation takes its tokens at once and may drive the balance negative (debt); the
caller then waits until the debt is repaid at the current rate. Concurrent reservations
queue behind each other in arrival order without a lock.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping

from starlette.responses import Response

from backends.errors import SlowDown


class RateGate:
    """One token bucket (bytes or operations) whose rate follows the gear."""

    __slots__ = ("_clock", "_stamp", "_tokens", "burst_s", "capacity", "charged", "rate")

    def __init__(self, rate: float, burst_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.burst_s = burst_s
        self.rate = rate
        self.capacity = max(rate * burst_s, 1.0)
        self._tokens = self.capacity
        self._stamp = clock()
        self.charged = 0.0  # every token ever taken (the controller measures use from it)

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def set_rate(self, rate: float) -> None:
        """Change the rate from now on (a gear change); the debt is kept."""
        self._refill()
        self.rate = rate
        self.capacity = max(rate * self.burst_s, 1.0)
        self._tokens = min(self._tokens, self.capacity)

    def wait_for(self, amount: float) -> float:
        """Seconds a reservation of ``amount`` would wait now (nothing is taken)."""
        self._refill()
        return max(0.0, (amount - self._tokens) / self.rate)

    def take(self, amount: float) -> float:
        """Take ``amount`` tokens; returns the seconds to wait until they are repaid."""
        self._refill()
        self._tokens -= amount
        self.charged += amount
        return max(0.0, -self._tokens / self.rate)


class ClassGate:
    """The bandwidth and IOPS buckets of one class on one path (requests or flushes)."""

    __slots__ = ("bandwidth", "iops", "max_wait_s", "refused")

    def __init__(self, bandwidth: float, iops: float | None, *, burst_s: float,
                 max_wait_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.bandwidth = RateGate(bandwidth, burst_s, clock)
        # Without an IOPS cap, operations are still counted (rate 1e12: never a wait).
        self.iops = RateGate(iops or 1e12, burst_s, clock)
        self.max_wait_s = max_wait_s
        self.refused = 0

    def set_caps(self, bandwidth: float, iops: float | None) -> None:
        self.bandwidth.set_rate(bandwidth)
        self.iops.set_rate(iops or 1e12)

    def reserve(self, nbytes: int, *, bounded: bool = True) -> float:
        """Take one operation and ``nbytes``; the seconds to wait. With ``bounded``, a
        wait longer than ``max_wait_s`` takes nothing and raises :class:`SlowDown`."""
        if bounded:
            wait = max(self.bandwidth.wait_for(nbytes), self.iops.wait_for(1))
            if wait > self.max_wait_s:
                self.refused += 1
                raise SlowDown("The bucket's QoS class is at its highest gear it may use "
                               "now; please reduce your request rate.",
                               retry_after=max(1, math.ceil(wait - self.max_wait_s)))
        return max(self.bandwidth.take(nbytes), self.iops.take(1))

    async def admit(self, headers: Mapping[str, str]) -> None:
        """Delay an S3 request of this class (its declared body size and one operation)."""
        wait = self.reserve(request_bytes(headers))
        if wait > 0:
            await asyncio.sleep(wait)

    def charge_response(self, method: str, response: Response) -> None:
        """Charge the body of a GET's response as debt (the class's next requests wait:
        a response already made is never held back)."""
        length = response.headers.get("content-length")
        if method == "GET" and response.status_code < 300 and length and length.isdigit():
            self.bandwidth.take(int(length))

    async def pace(self, nbytes: int) -> None:
        """Delay a flush of ``nbytes`` (never refused: flushing must go on)."""
        wait = self.reserve(nbytes, bounded=False)
        if wait > 0:
            await asyncio.sleep(wait)


def request_bytes(headers: Mapping[str, str]) -> int:
    """The body size a request declares (aws-chunked: the decoded size), else 0."""
    text = headers.get("x-amz-decoded-content-length") or headers.get("content-length")
    if text is None or not text.isdigit():
        return 0
    return int(text)
