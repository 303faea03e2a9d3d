"""Per-key mutual exclusion that costs nothing for keys nobody holds."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Hashable


class KeyLocks:
    """One FIFO mutex per key, created on demand and dropped when free.

    ``try_acquire`` is synchronous so that a decision taken without awaiting (eviction)
    can claim a key atomically with that decision.
    """

    def __init__(self) -> None:
        self._held: dict[Hashable, deque[asyncio.Future[None]]] = {}

    def locked(self, key: Hashable) -> bool:
        return key in self._held

    def try_acquire(self, key: Hashable) -> bool:
        if key in self._held:
            return False
        self._held[key] = deque()
        return True

    async def acquire(self, key: Hashable) -> None:
        if self.try_acquire(key):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._held[key].append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(key)  # ownership was handed over as we were cancelled
            else:
                with contextlib.suppress(ValueError, KeyError):
                    self._held[key].remove(fut)
            raise

    def release(self, key: Hashable) -> None:
        waiters = self._held[key]
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # ownership passes to the first live waiter
                return
        del self._held[key]

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        await self.acquire(key)
        try:
            yield
        finally:
            self.release(key)
