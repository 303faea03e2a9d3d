"""Reachability of a networked store: probed in the background, logged once per change,
reported by ``/_squall/status`` and ``/_squall/health``."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from backends.base import ProbedBackend
from gateway.background import BackgroundLoop

log = logging.getLogger("squall.backend")


class BackendWatch:
    """Probes ``store`` every ``interval_s`` seconds while the application runs."""

    def __init__(self, store: ProbedBackend, *, interval_s: float) -> None:
        self._store = store
        self._interval_s = interval_s
        self._loop = BackgroundLoop(self._run, "backend-watch")
        #: why the store cannot be reached, or None while it answers (or is not probed yet)
        self.problem: str | None = None
        self._since = time.time()

    async def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def check(self) -> str | None:
        """Probe once now; the state (and the log, on a change) follow the answer."""
        try:
            problem = await self._store.probe()
        except Exception as exc:  # noqa: BLE001 - a probe must not stop the watch
            problem = f"probe failed: {exc!r}"
        if (problem is None) != (self.problem is None):  # a change of state
            if problem is None:
                log.warning("backend reachable again (after %.0f s)", time.time() - self._since)
            else:
                log.error("backend unreachable: %s", problem)
            self._since = time.time()
        self.problem = problem
        return problem

    def status(self) -> dict[str, Any]:
        """``reachable``, the ``reason`` when it is not, and since when (epoch seconds)."""
        out: dict[str, Any] = {"reachable": self.problem is None, "since": round(self._since, 3)}
        if self.problem is not None:
            out["reason"] = self.problem
        return out

    async def _run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self._interval_s)
