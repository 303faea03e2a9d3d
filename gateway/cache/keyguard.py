"""Per-key guard between the writes of a key and what must not race them.

Writes of a key share it (they never wait for each other). Two kinds of holders take it
alone, and while they hold it new writes of that key wait for them:

* a lifecycle expiration (:meth:`WriteGuard.expiring`) does not wait: a key being written
  is simply not expired this time, and an expiration never deletes a version written
  after it looked at the key;
* a cluster member handing the key over to its new owner (:meth:`WriteGuard.exclusive`)
  waits for the writes under way to end, so what it hands over is the newest state;
  the writes held back then find that the key has moved.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager


class WriteGuard:
    """Shared holds for writers, exclusive holds (tried or awaited), per key."""

    def __init__(self) -> None:
        self._writers: dict[Hashable, int] = {}
        self._expiring: dict[Hashable, asyncio.Event] = {}  # held alone; set when released
        self._idle: dict[Hashable, asyncio.Event] = {}  # set when the last writer leaves

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
                idle = self._idle.pop(key, None)
                if idle is not None:
                    idle.set()

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

    @asynccontextmanager
    async def exclusive(self, key: Hashable) -> AsyncIterator[None]:
        """The key held alone, once the writes under way and other holders are done."""
        while (busy := self._expiring.get(key)) is not None:
            await busy.wait()
        done = asyncio.Event()
        self._expiring[key] = done
        try:
            while self._writers.get(key):
                idle = self._idle.setdefault(key, asyncio.Event())
                await idle.wait()
            yield
        finally:
            del self._expiring[key]
            done.set()

    def __len__(self) -> int:
        return len(self._writers) + len(self._expiring)
