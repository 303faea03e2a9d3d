"""Per-key guard between writes and lifecycle expiration.

Writes of a key share it (they never wait for each other); an expiration takes it alone,
without waiting: a key being written is simply not expired this time. While an
expiration holds a key (one check and one delete), new writes of that key wait for it,
so an expiration never deletes a version written after it looked at the key.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager


class WriteGuard:
    """Shared holds for writers, exclusive try-holds for expiration, per key."""

    def __init__(self) -> None:
        self._writers: dict[Hashable, int] = {}
        self._expiring: dict[Hashable, asyncio.Event] = {}

    @asynccontextmanager
    async def writing(self, key: Hashable) -> AsyncIterator[None]:
        while (busy := self._expiring.get(key)) is not None:
            await busy.wait()
        self._writers[key] = self._writers.get(key, 0) + 1
        try:
            yield
        finally:
            left = self._writers[key] - 1
            if left:
                self._writers[key] = left
            else:
                del self._writers[key]

    @asynccontextmanager
    async def expiring(self, key: Hashable) -> AsyncIterator[bool]:
        """Yields True with the key held alone, False (nothing held) when it is busy."""
        if key in self._writers or key in self._expiring:
            yield False
            return
        done = asyncio.Event()
        self._expiring[key] = done
        try:
            yield True
        finally:
            del self._expiring[key]
            done.set()

    def __len__(self) -> int:
        return len(self._writers) + len(self._expiring)
