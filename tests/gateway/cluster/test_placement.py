"""Who serves a key: its owner, or while the owner is down (health) the next member
of its preference list that is up; and which members mirror it (no network needed)."""

from __future__ import annotations

import time

from gateway.cluster.health import Health, HealthMonitor
from gateway.cluster.peerauth import PeerAuth
from gateway.cluster.placement import STARTUP_GRACE_S, Placement
from gateway.cluster.ring import Ring, owner_index, weight, worker_index
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.transport import PeerTransport

URLS = ["http://a:1", "http://b:1", "http://c:1"]


def placement(replicas: int, self_index: int = 0) -> tuple[Placement, HealthMonitor]:
    ring = Ring.of(URLS, self_index)
    settings = ClusterSettings(ring=ring, secret=b"s" * 16)
    auth = PeerAuth(settings.secret, ring_id=ring.id, self_index=self_index)
    health = HealthMonitor(ring, PeerTransport(settings, auth), interval_s=2)
    return Placement(ring, health, replicas), health


def key_with(order: list[int]) -> str:
    probe, _ = placement(2)
    return next(f"k{i}" for i in range(10000) if probe.preference("b", f"k{i}") == order)


def test_preference_starts_with_the_owner() -> None:
    where, _ = placement(2)
    for i in range(200):
        assert where.preference("b", f"k{i}")[0] == owner_index(URLS, "b", f"k{i}")


def test_a_down_owner_moves_its_keys_to_the_next_member_up() -> None:
    where, health = placement(2)
    key = key_with([1, 2, 0])
    assert where.owner("b", key) == 1 and where.mirrors("b", key) == [2]
    health._record(1, Health.UP, None, 1.0)
    health._record(1, Health.DOWN, "refused", 1.0)
    assert where.down(1) and where.owner("b", key) == 2 and not where.owns("b", key)
    assert where.mirrors("b", key) == [0]
    where.returned(1)  # it claimed its keys back: served by it again
    assert where.owner("b", key) == 1
    health._record(1, Health.UP, None, 1.0)
    health._record(1, Health.DOWN, "refused", 1.0)  # down again after answering
    assert where.owner("b", key) == 2


def test_a_member_never_seen_up_keeps_its_keys_while_members_start() -> None:
    where, health = placement(2)
    key = key_with([1, 0, 2])
    health._record(1, Health.DOWN, "refused", 1.0)
    assert where.owner("b", key) == 1
    health.states[1].since = time.time() - STARTUP_GRACE_S - 1
    assert where.owner("b", key) == 0 and where.owns("b", key)


def test_one_replica_ignores_health() -> None:
    where, health = placement(1)
    key = key_with([1, 0, 2])
    health._record(1, Health.UP, None, 1.0)
    health._record(1, Health.DOWN, "refused", 1.0)
    assert where.owner("b", key) == 1 and where.mirrors("b", key) == []


def test_a_membership_change_keeps_the_replicas_the_members_allow() -> None:
    where, _ = placement(2)
    where.rebind(Ring.of(URLS[:1] + URLS[2:], 0))
    assert where.replicas == 2 and where.mirrored
    where.rebind(Ring.of(URLS[:1], 0))
    assert where.replicas == 1 and not where.mirrored
    where.rebind(Ring.of(URLS, 0))
    assert where.replicas == 2


def test_a_member_removed_while_down_has_its_keys_stood_in_for() -> None:
    """A live removal of a down member: it counts as down whatever health last found,
    and each of its keys goes to the next member of the key's list that is up."""
    where, health = placement(2)
    key = key_with([1, 2, 0])
    assert where.stand_in("b", key, 1) == 2 and where.owner("b", key) == 1
    where.lost.add(1)  # (never seen down by this member's health checks)
    assert where.down(1) and where.owner("b", key) == 2 and where.mirrors("b", key) == [0]
    health._record(2, Health.UP, None, 1.0)
    health._record(2, Health.DOWN, "refused", 1.0)
    assert where.stand_in("b", key, 1) == 0
    where.rebind(Ring.of(URLS[:1] + URLS[2:], 0))  # the change committed
    assert not where.lost


def test_copies_of_a_hosts_workers_are_on_other_hosts() -> None:
    """Hosts running two workers: the preference list holds the key's worker of each
    host (hosts in the order of their weights), so copies never sit beside the owner,
    and R is bounded by the hosts."""
    ring = Ring.of_hosts(URLS, 0, 2, 1)
    settings = ClusterSettings(ring=ring, secret=b"s" * 16)
    auth = PeerAuth(settings.secret, ring_id=ring.id, self_index=ring.self_index)
    health = HealthMonitor(ring, PeerTransport(settings, auth), interval_s=2)
    where = Placement(ring, health, 5)
    assert where.replicas == 3
    for i in range(200):
        key = f"k{i}"
        order = where.preference("b", key)
        hosts = sorted(range(3), reverse=True, key=lambda h: weight(URLS[h], "b", key))
        assert order == [h * 2 + worker_index(2, "b", key) for h in hosts]
        assert order[0] == ring.owner("b", key) == where.owner("b", key)
        assert {m // 2 for m in where.mirrors("b", key)} == set(hosts[1:])
