"""Reachability of a networked store: probed in the background, logged once per change,
reported by ``/_squall/status`` and ``/_squall/health``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from backends.core.base import ProbedBackend
from gateway.background import PeriodicTask

log = logging.getLogger("squall.backend")

#: a probe gets at least this long to answer (a store that accepts connections but
#: answers nothing, a stopped server or a black-holed link, counts as unreachable)
MIN_PROBE_TIMEOUT_S = 10.0


def probe_timeout(interval_s: float) -> float:
    """How long one probe may take: twice the interval, at least MIN_PROBE_TIMEOUT_S."""
    return max(MIN_PROBE_TIMEOUT_S, 2 * interval_s)


class BackendWatch:
    """Probes ``store`` every ``interval_s`` seconds while the application runs."""

    def __init__(self, store: ProbedBackend, *, interval_s: float) -> None:
        self._store = store
        self._timeout_s = probe_timeout(interval_s)
        self._loop = PeriodicTask(self.check, every=interval_s, name="backend-watch")
        #: why the store cannot be reached, or None while it answers (or is not probed yet)
        self.problem: str | None = None
        #: called with ``reachable`` at each change of state
        self.listeners: list[Callable[[bool], None]] = []
        self._since = time.time()

    async def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def check(self) -> str | None:
        """Probe once now; the state (and the log, on a change) follow the answer."""
        try:
            problem = await asyncio.wait_for(self._store.probe(), self._timeout_s)
        except TimeoutError:
            problem = f"The store did not answer within {self._timeout_s:.0f} s."
        except Exception:  # a probe must not stop the watch
            log.exception("probing the backend failed")
            problem = "The store could not be probed."
        if (problem is None) != (self.problem is None):  # a change of state
            if problem is None:
                log.warning("backend reachable again (after %.0f s)", time.time() - self._since)
            else:
                log.error("backend unreachable: %s", problem)
            for listener in self.listeners:
                listener(problem is None)
            self._since = time.time()
        self.problem = problem
        return problem

    def status(self) -> dict[str, Any]:
        """``reachable``, the ``reason`` when it is not, and since when (epoch seconds)."""
        out: dict[str, Any] = {"reachable": self.problem is None, "since": round(self._since, 3)}
        if self.problem is not None:
            out["reason"] = self.problem
        return out
