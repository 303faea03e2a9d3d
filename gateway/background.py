"""One background loop of a gateway component: started once, cancelled and awaited on stop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any


class BackgroundLoop:
    """Runs ``body()`` as a named task from :meth:`start` until :meth:`stop`."""

    def __init__(self, body: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        self._body = body
        self._name = name
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start the task (no-op while it runs); call from a running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._body(), name=self._name)

    async def stop(self) -> None:
        """Cancel the task and wait until it has ended (no-op when not started)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
