"""Which of this host's workers a request is for: by the peer marker's target, else by
its key's owner (no network: the cluster's ring, placement and marker)."""

from __future__ import annotations

from gateway.cluster.health import HealthMonitor
from gateway.cluster.peerauth import PeerAuth
from gateway.cluster.placement import Placement
from gateway.cluster.ring import Ring
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.transport import PeerTransport
from gateway.workers.handover import KeyOwners
from gateway.workers.host import HostWorkers

HOSTS = ("http://a:1", "http://b:1")


def _owners(ring: Ring, host: HostWorkers) -> tuple[KeyOwners, PeerAuth]:
    settings = ClusterSettings(ring=ring, secret=b"s" * 16)
    auth = PeerAuth(settings.secret, ring_id=ring.id, self_index=ring.self_index)
    health = HealthMonitor(ring, PeerTransport(settings, auth), interval_s=2)
    return KeyOwners(Placement(ring, health, 1), None, host), auth


def test_a_hosts_workers_among_the_members() -> None:
    host = HostWorkers(first=2, count=2)  # host 1 of hosts of two workers
    assert [host.worker(m) for m in range(5)] == [None, None, 0, 1, None]
    auth = PeerAuth(b"s" * 16, ring_id="r", self_index=0)
    assert host.addressed(auth.sign("GET", b"/x", b"", 3).encode()) == 1
    assert host.addressed(auth.sign("GET", b"/x", b"", 1).encode()) is None  # host 0's
    assert host.addressed(b"v1:garbage") is None


def test_requests_go_to_the_worker_of_their_marker_or_their_key() -> None:
    ring = Ring.of_hosts(HOSTS, 1, 2, 0)  # worker 0 of host 1: member 2
    owners, auth = _owners(ring, HostWorkers(first=2, count=2))
    local = {ring.owner("b", f"k{i}"): f"k{i}" for i in range(100)}
    assert owners.other_owner(f"/b/{local[3]}".encode(), b"h") == 1
    assert owners.other_owner(f"/b/{local[2]}".encode(), b"h") is None  # this worker's
    assert owners.other_owner(f"/b/{local[0]}".encode(), b"h") is None  # host 0: forwarded
    assert owners.other_owner(b"/_squall/peer/dirty?bucket=b", b"h") is None
    # a peer request goes where its marker says, whatever its path
    signed = auth.sign("GET", b"/_squall/cluster", b"", 3).encode()
    assert owners.other_owner(b"/_squall/cluster", b"h", signed) == 1
    mine = auth.sign("GET", b"/_squall/cluster", b"", 2).encode()
    assert owners.other_owner(f"/b/{local[3]}".encode(), b"h", mine) is None


def test_the_workers_of_one_host_are_the_whole_ring() -> None:
    ring = Ring.of([f"http://worker-{k}" for k in range(3)], 1)
    owners, _ = _owners(ring, HostWorkers(first=0, count=3))
    for i in range(50):
        owner = ring.owner("b", f"k{i}")
        expected = None if owner == 1 else owner
        assert owners.other_owner(f"/b/k{i}".encode(), b"h") == expected
