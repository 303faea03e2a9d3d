"""Background tasks of gateway components: started once, cancelled and awaited on stop.

:class:`BackgroundLoop` runs a coroutine of the component's own (a watch, a queue);
:class:`PeriodicTask` runs one step every interval, which is what most of them are.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import Any

_log = logging.getLogger(__name__)
_CANCEL_AGAIN_S = 10.0  # a task still running this long after a cancel lost it


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
        """Cancel the task and wait until it has ended (no-op when not started). A task
        that goes on is cancelled again every 10 s: a cancellation can be lost inside
        it (``asyncio.wait_for`` before Python 3.12 drops one that arrives as its inner
        call finishes), and a stop must end it all the same."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        while not (await asyncio.wait({task}, timeout=_CANCEL_AGAIN_S))[0]:
            _log.warning("background task %s went on after it was cancelled: cancelling "
                         "it again", self._name)
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class PeriodicTask(BackgroundLoop):
    """Runs ``step()`` (a function or a coroutine function; what it returns is ignored)
    every ``every`` seconds from :meth:`start` until :meth:`stop`: the first step at
    once, or one interval after the start with ``wait_first``. ``every`` may be a
    function, read before each wait (an interval the settings may change).

    A step that raises is logged on ``log`` as ``failed`` (the task's name by default)
    and the next step comes an interval later: a failing step never ends the task.
    """

    def __init__(self, step: Callable[[], object], *,
                 every: float | Callable[[], float], name: str, wait_first: bool = False,
                 log: logging.Logger = _log, failed: str | None = None) -> None:
        super().__init__(self._run, name)
        self._step = step
        self._every: Callable[[], float] = every if callable(every) else lambda: every
        self._wait_first = wait_first
        self._log = log
        self._failed = failed or f"{name} step"

    async def _run(self) -> None:
        if self._wait_first:
            await asyncio.sleep(self._every())
        while True:
            try:
                result = self._step()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001 - logged; the next step comes an interval later
                self._log.exception("%s failed", self._failed)
            await asyncio.sleep(self._every())
