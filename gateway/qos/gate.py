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

from backends.core.errors import SlowDown

#: longest sleep of a waiting request before it looks at the rate again
RECHECK_S = 0.1


class RateGate:
    """One token bucket (bytes or operations) whose rate follows the gear."""

    __slots__ = ("_clock", "_stamp", "_tokens", "burst_s", "busy", "capacity", "charged",
                 "rate")

    def __init__(self, rate: float, burst_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.burst_s = burst_s
        self.rate = rate
        self.capacity = max(rate * burst_s, 1.0)
        self._tokens = self.capacity
        self._stamp = clock()
        self.charged = 0.0  # every token ever taken (the controller measures use from it)
        self.busy = 0.0  # seconds during which taken tokens waited to be repaid (debt)

    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._stamp
        if self._tokens < 0.0:  # in debt: requests waited at the cap until it was repaid
            self.busy += min(elapsed, -self._tokens / self.rate)
        self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
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

    def level(self) -> float:
        """Tokens available now (negative: debt)."""
        self._refill()
        return self._tokens

    def backlog(self) -> float:
        """Tokens taken but not yet repaid: what is waiting at the gate now."""
        self._refill()
        return max(0.0, -self._tokens)

    def remaining(self, ticket: float) -> float:
        """Seconds until the tokens taken up to ``ticket`` (``charged`` just after a
        take) are repaid at the current rate: a promotion shortens a wait under way."""
        self._refill()
        return max(0.0, (ticket - self.charged - min(0.0, self._tokens)) / self.rate)

    def take(self, amount: float) -> float:
        """Take ``amount`` tokens; returns the seconds to wait until they are repaid."""
        self._refill()
        self._tokens -= amount
        self.charged += amount
        return max(0.0, -self._tokens / self.rate)


class ClassGate:
    """The bandwidth and IOPS buckets of one class on one path (requests or flushes).

    A class running the credit scheme (EBS gp2) has a second pair of buckets, the
    credits: they refill at the baseline and hold ``credit_s`` seconds of it; a request
    takes from both pairs, so it bursts at the peak caps while credits last, then runs
    at the baseline.
    """

    __slots__ = ("bandwidth", "credit_bandwidth", "credit_iops", "iops", "max_wait_s",
                 "refused", "refused_bytes")

    def __init__(self, bandwidth: float, iops: float | None, *, burst_s: float,
                 max_wait_s: float, clock: Callable[[], float] = time.monotonic,
                 credit: tuple[float, float | None, float] | None = None) -> None:
        self.bandwidth = RateGate(bandwidth, burst_s, clock)
        # Without an IOPS cap, operations are still counted (rate 1e12: never a wait).
        self.iops = RateGate(iops or 1e12, burst_s, clock)
        self.credit_bandwidth: RateGate | None = None
        self.credit_iops: RateGate | None = None
        if credit is not None:
            base_bw, base_iops, credit_s = credit
            self.credit_bandwidth = RateGate(base_bw, credit_s, clock)
            if base_iops is not None:
                self.credit_iops = RateGate(base_iops, credit_s, clock)
        self.max_wait_s = max_wait_s
        self.refused = 0
        self.refused_bytes = 0

    def set_caps(self, bandwidth: float, iops: float | None) -> None:
        self.bandwidth.set_rate(bandwidth)
        self.iops.set_rate(iops or 1e12)

    def backlog(self) -> tuple[float, float]:
        """Bytes and operations waiting at the gate (taken, not yet repaid); also brings
        the ``busy`` counters of the bandwidth and IOPS buckets up to now."""
        nbytes, ops = self.bandwidth.backlog(), self.iops.backlog()
        if self.credit_bandwidth is not None:
            nbytes = max(nbytes, self.credit_bandwidth.backlog())
        if self.credit_iops is not None:
            ops = max(ops, self.credit_iops.backlog())
        return nbytes, ops

    def _wait(self, nbytes: int, take: bool) -> float:
        """The wait of one operation and ``nbytes``: taken (``take``) or only looked up."""
        op = RateGate.take if take else RateGate.wait_for
        wait = max(op(self.bandwidth, nbytes), op(self.iops, 1))
        if self.credit_bandwidth is not None:  # only classes on the credit scheme
            wait = max(wait, op(self.credit_bandwidth, nbytes))
        if self.credit_iops is not None:
            wait = max(wait, op(self.credit_iops, 1))
        return wait

    def reserve(self, nbytes: int, *, bounded: bool = True) -> float:
        """Take one operation and ``nbytes``; the seconds to wait. With ``bounded``, a
        wait longer than ``max_wait_s`` takes nothing and raises :class:`SlowDown`."""
        if bounded:
            wait = self._wait(nbytes, take=False)
            if wait > self.max_wait_s:
                self.refused += 1
                self.refused_bytes += nbytes
                raise SlowDown("The bucket's QoS class is at its highest gear it may use "
                               "now; please reduce your request rate.",
                               retry_after=max(1, math.ceil(wait - self.max_wait_s)),
                               public=True)
        return self._wait(nbytes, take=True)

    async def admit(self, headers: Mapping[str, str]) -> None:
        """Delay an S3 request of this class (its declared body size and one operation)."""
        wait = self.reserve(request_bytes(headers))
        if wait > 0:
            await self._wait_repaid(wait)

    async def _wait_repaid(self, wait: float) -> None:
        """Sleep until this reservation's tokens are repaid, at the rate of the moment:
        a gear changed during the wait changes its end."""
        gates = [g for g in (self.bandwidth, self.iops, self.credit_bandwidth,
                             self.credit_iops) if g is not None]
        tickets = [g.charged for g in gates]
        while wait >= 1e-3:  # wake up a few times a second to see a new gear
            await asyncio.sleep(min(wait, RECHECK_S))
            wait = max(g.remaining(t) for g, t in zip(gates, tickets, strict=True))

    def charge_response(self, method: str, response: Response) -> None:
        """Charge the body of a GET's response as debt (the class's next requests wait:
        a response already made is never held back)."""
        length = response.headers.get("content-length")
        if method == "GET" and response.status_code < 300 and length and length.isdigit():
            self.bandwidth.take(int(length))
            if self.credit_bandwidth is not None:
                self.credit_bandwidth.take(int(length))

    async def pace(self, nbytes: int) -> None:
        """Delay a flush of ``nbytes`` (never refused: flushing must go on)."""
        wait = self.reserve(nbytes, bounded=False)
        if wait > 0:
            await self._wait_repaid(wait)


def request_bytes(headers: Mapping[str, str]) -> int:
    """The body size a request declares (aws-chunked: the decoded size), else 0."""
    text = headers.get("x-amz-decoded-content-length") or headers.get("content-length")
    if text is None or not text.isdigit():
        return 0
    return int(text)
