"""A token bucket: the one rate limiter of bytes and operations (backends and the gateway)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class TokenBucket:
    """A token bucket with debt: ``acquire(n)`` takes ``n`` tokens at once and sleeps
    until the balance is non-negative again, so requests larger than the bucket pass
    at the configured rate. Waiters are served first come, first served."""

    def __init__(self, rate: float, capacity: float,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError("token bucket rate and capacity must be positive")
        self.rate = rate
        self.capacity = capacity
        self.consumed = 0.0
        self._clock = clock
        self._sleep = sleep
        self._tokens = capacity
        self._stamp = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, amount: float) -> None:
        if amount <= 0:
            return
        async with self._lock:
            self._refill()
            self._tokens -= amount
            self.consumed += amount
            if self._tokens < 0:
                await self._sleep(-self._tokens / self.rate)
