"""Member health: every few seconds each peer's ``/_squall/cluster`` is asked (it says
whether the member is ready, and its ring id, which must equal ours).

Health is reported (``/_squall/cluster``, ``squall_cluster_member_up``); it does not
decide routing. Requests for a member's keys are always tried, so a member that has just
come back serves at once and one that has just died fails with a clear 503.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from gateway.background import BackgroundLoop
from gateway.cluster.errors import MemberUnavailable
from gateway.cluster.ring import Ring
from gateway.cluster.transport import PeerTransport

log = logging.getLogger("squall.cluster")


class Health(enum.Enum):
    UNKNOWN = "unknown"  # not asked yet
    UP = "up"
    STARTING = "starting"  # answers, but not ready (replaying its cache)
    DOWN = "down"
    MISMATCH = "ring-mismatch"  # started with another member list: peers refuse it


@dataclass(slots=True)
class MemberState:
    health: Health = Health.UNKNOWN
    since: float = 0.0
    last_ok: float | None = None
    error: str | None = None
    latency_ms: float | None = None
    checked: float = 0.0  # when the last check ended


class HealthMonitor:
    def __init__(self, ring: Ring, transport: PeerTransport, *, interval_s: float,
                 registry: CollectorRegistry | None = None) -> None:
        self._ring = ring
        self._transport = transport
        self._interval = interval_s
        now = time.time()
        self.states = {i: MemberState(since=now) for i in range(len(ring.members))
                       if i != ring.self_index}
        self._background = BackgroundLoop(self._loop, "cluster-health")
        #: told of the membership version and members each member reports
        self.heard: Callable[[int, tuple[str, ...], object], None] | None = None
        self._gauge: Gauge | None = None
        if registry is not None:
            self._gauge = Gauge("squall_cluster_member_up",
                                "1 if the cluster member answered its last health check",
                                ["node", "url"], registry=registry)

    def start(self) -> None:
        if self.states:
            self._background.start()

    def rebind(self, ring: Ring) -> None:
        """The member list changed (live membership): check these members from now on."""
        now = time.time()
        old = {self._ring.members[i]: state for i, state in self.states.items()}
        self._ring = ring
        self.states = {i: old.get(url) or MemberState(since=now)
                       for i, url in enumerate(ring.members) if i != ring.self_index}
        if self._gauge is not None:
            self._gauge.clear()
        if self.states and self._background.running:
            return
        if self.states:
            self._background.start()

    async def stop(self) -> None:
        await self._background.stop()

    async def _loop(self) -> None:
        while True:
            await asyncio.gather(*(self.probe(i) for i in list(self.states)))
            await asyncio.sleep(self._interval)

    async def probe(self, node: int) -> Health:
        """Ask member ``node`` now and record the answer."""
        started = time.perf_counter()
        error: str | None = None
        try:
            response = await self._transport.open(node, "GET", b"/_squall/cluster",
                                                  timeout=max(1.0, self._interval))
            try:
                body = b"".join([c async for c in self._transport.body(node, response)])
            finally:
                await response.aclose()
            health, error = self._judge(response.status, body)
        except MemberUnavailable as exc:
            health, error = Health.DOWN, exc.reason
        self._record(node, health, error, (time.perf_counter() - started) * 1000)
        return health

    def _judge(self, status: int, body: bytes) -> tuple[Health, str | None]:
        try:
            view = json.loads(body) if status == 200 else None
        except ValueError:
            view = None
        if not isinstance(view, dict):
            return Health.STARTING, f"ring view answered HTTP {status}"
        version = view.get("membership_version")
        if self.heard is not None and isinstance(version, int) \
                and view.get("membership") in ("stable", "changing"):
            self.heard(version, tuple(str(m.get("url")) for m in view.get("members", [])),
                       view.get("membership_base"))
        if view.get("ring_id") != self._ring.id:
            return Health.MISMATCH, (f"it was started with another member list (ring "
                                     f"{view.get('ring_id')}, here {self._ring.id})")
        own = [m for m in view.get("members", []) if m.get("self")]
        if own and own[0].get("health") == "up":
            return Health.UP, None
        return Health.STARTING, "not ready yet"

    def _record(self, node: int, health: Health, error: str | None, latency_ms: float) -> None:
        state = self.states.get(node)
        if state is None:  # the member list changed during the check
            return
        now = time.time()
        if state.health is not health:
            quiet = health is Health.UP or state.health is Health.UNKNOWN  # e.g. at start
            log.log(logging.INFO if quiet else logging.WARNING,
                    "cluster member %d (%s) is %s%s", node, self._ring.members[node],
                    health.value, f": {error}" if error else "")
            state.health, state.since = health, now
        state.error = error
        state.checked = now
        if health is Health.UP:
            state.last_ok = now
            state.latency_ms = round(latency_ms, 3)
        if self._gauge is not None:
            self._gauge.labels(str(node), self._ring.members[node]).set(
                1 if health is Health.UP else 0)

    def describe(self, node: int) -> dict[str, Any]:
        state = self.states[node]
        return {"health": state.health.value, "since": state.since,
                "last_ok": state.last_ok, "error": state.error,
                "latency_ms": state.latency_ms}
