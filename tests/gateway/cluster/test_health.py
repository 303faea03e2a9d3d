"""How a member judges another from its ring view (no network needed)."""

from __future__ import annotations

import json

from gateway.cluster.health import Health, HealthMonitor
from gateway.cluster.peerauth import PeerAuth
from gateway.cluster.ring import Ring
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.transport import PeerTransport

RING = Ring.of(["http://a:1", "http://b:1"], 0)


def monitor() -> HealthMonitor:
    settings = ClusterSettings(ring=RING, secret=b"s" * 16)
    auth = PeerAuth(settings.secret, ring_id=RING.id, self_index=0)
    return HealthMonitor(RING, PeerTransport(settings, auth), interval_s=2)


def view(ring_id: str | None, health: str) -> bytes:
    return json.dumps({"ring_id": ring_id, "members": [
        {"node_id": 0, "self": False}, {"node_id": 1, "self": True, "health": health}]}).encode()


def test_judging_a_member() -> None:
    judge = monitor()._judge
    assert judge(200, view(RING.id, "up")) == (Health.UP, None)
    assert judge(200, view(RING.id, "starting"))[0] is Health.STARTING
    health, error = judge(200, view("0123456789abcdef", "up"))
    assert health is Health.MISMATCH and "another member list" in (error or "")
    assert judge(503, b"")[0] is Health.STARTING
    assert judge(200, b"not json")[0] is Health.STARTING


def test_states_are_recorded_and_described() -> None:
    health = monitor()
    assert health.describe(1)["health"] == "unknown"
    health._record(1, Health.DOWN, "connection refused", 1.0)
    assert health.describe(1)["health"] == "down"
    assert health.describe(1)["error"] == "connection refused"
    health._record(1, Health.UP, None, 0.5)
    described = health.describe(1)
    assert described["health"] == "up" and described["latency_ms"] == 0.5
