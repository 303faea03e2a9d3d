"""One broadcast of "the cache's state changed", shared by the record index and the
space manager: writers waiting for room, the flusher and drains all wait on it."""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout: float | None) -> None:  # noqa: ASYNC109  helper
    """Wait for ``event`` at most ``timeout`` seconds. (``asyncio.timeout`` rather than
    ``wait_for``, which on 3.11 can swallow a cancellation that races the event.)"""
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        pass


class Changes:
    """Each :meth:`changed` sets the current event and replaces it with a fresh one. To
    wait without missing a change: take :attr:`event`, re-check, then :meth:`wait`."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = asyncio.Event()

    @property
    def event(self) -> asyncio.Event:
        """The event set at the next change."""
        return self._event

    def changed(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, timeout: float | None,  # noqa: ASYNC109  the timeout helper itself
                   event: asyncio.Event | None = None) -> None:
        """Wait for the next change (or ``event``, taken earlier) at most ``timeout`` s."""
        await wait_event(event or self._event, timeout)
