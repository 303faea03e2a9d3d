"""Which of this host's workers a request is for: by the peer marker's target, else by
its key's owner (no network: the cluster's view and the marker)."""

from __future__ import annotations

from gateway.cluster.peerauth import PeerAuth
from gateway.cluster.ring import Ring
from gateway.cluster.static import StaticMembership
from gateway.cluster.view import member_id
from gateway.http.workers.handover import KeyOwners
from gateway.http.workers.host import HostWorkers

HOSTS = ("http://a:1", "http://b:1")


def _sign(target: str, path: bytes = b"/x") -> bytes:
    return PeerAuth(b"s" * 16, member="0" * 16).sign("GET", path, b"", member_id(target),
                                                     "7").encode()


def test_a_hosts_workers_among_the_members() -> None:
    host = HostWorkers.of("http://b:1/worker-1", 1, 2)  # host 1 of hosts of two workers
    assert host.names == ["http://b:1/worker-0", "http://b:1/worker-1"] and host.in_cluster
    assert [host.worker(m) for m in ("http://a:1/worker-0", *host.names, None)] == \
        [None, 0, 1, None]
    assert host.addressed(_sign("http://b:1/worker-1")) == 1
    assert host.addressed(_sign("http://a:1/worker-1")) is None  # host 0's
    assert host.addressed(b"v2:garbage") is None
    alone = HostWorkers.of("http://worker-2", 2, 3)
    assert alone.names == [f"http://worker-{k}" for k in range(3)] and not alone.in_cluster


def test_requests_go_to_the_worker_of_their_marker_or_their_key() -> None:
    ring = Ring.of_hosts(HOSTS, 1, 2, 0)  # worker 0 of host 1
    owners = KeyOwners(StaticMembership(ring), None, HostWorkers.of(ring.self_url, 0, 2))
    local = {ring.members[ring.owner("b", f"k{i}")]: f"k{i}" for i in range(100)}
    assert owners.other_owner(f"/b/{local['http://b:1/worker-1']}".encode(), b"h") == 1
    assert owners.other_owner(f"/b/{local['http://b:1/worker-0']}".encode(), b"h") is None
    assert owners.other_owner(f"/b/{local['http://a:1/worker-0']}".encode(), b"h") is None
    assert owners.other_owner(b"/_squall/peer/dirty?bucket=b", b"h") is None
    # a peer request goes where its marker says, whatever its path
    signed = _sign("http://b:1/worker-1", b"/_squall/cluster")
    assert owners.other_owner(b"/_squall/cluster", b"h", signed) == 1
    mine = _sign("http://b:1/worker-0", b"/_squall/cluster")
    assert owners.other_owner(f"/b/{local['http://b:1/worker-1']}".encode(), b"h",
                              mine) is None


def test_the_workers_of_one_host_are_the_whole_ring() -> None:
    ring = Ring.of([f"http://worker-{k}" for k in range(3)], 1)
    owners = KeyOwners(StaticMembership(ring), None, HostWorkers.of(ring.self_url, 1, 3))
    for i in range(50):
        owner = ring.owner("b", f"k{i}")
        expected = None if owner == 1 else owner
        assert owners.other_owner(f"/b/k{i}".encode(), b"h") == expected
