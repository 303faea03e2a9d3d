"""Where the mount's object requests go (routing.py): rings read from real gateways and
clusters (status views closed: the reads are signed), members probed with real
connections, and the ring read again while a coordinated cluster grows."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from gateway.client.credentials import Credentials
from gateway.client.failures import ClientFailure
from gateway.fuse_mount.routing import OwnerRouter, owner_router, ring_reader, unreachable
from gateway.fuse_mount.settings import MountSettings
from tests.gateway.cluster.conftest import Cluster
from tests.support.etcd import EtcdServer
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port

TOKEN = "a-status-token-of-24-chars"
BUCKET = "routed"


def settings(endpoint: str, route: bool | None = None) -> MountSettings:
    return MountSettings(endpoint=endpoint, bucket=BUCKET, mountpoint=Path("/unused"),
                         credentials=Credentials(ACCESS_KEY, SECRET_KEY),
                         route_to_owners=route)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def assert_routes_like_the_members(router: OwnerRouter, cluster: Cluster,
                                   members: list[int]) -> None:
    for i in range(50):
        key = f"dir/key-{i}"
        assert router.owner(BUCKET, key) == cluster.urls[cluster.owner(BUCKET, key, members)]


def test_a_gateway_without_peers_keeps_the_endpoint(squall: SquallProcess,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "gateway.fuse_mount")
    assert owner_router(settings(squall.endpoint)) is None
    assert owner_router(settings(squall.endpoint, True)) is None
    assert warnings(caplog) == []
    assert any("without peers" in r.getMessage() for r in caplog.records)


def test_a_ring_that_cannot_be_read(caplog: pytest.LogCaptureFixture) -> None:
    """Automatic: one warning, every request to the endpoint; --route-to-owners: a clear
    failure; --no-route-to-owners: not even tried."""
    endpoint = f"http://127.0.0.1:{free_port()}"
    caplog.set_level(logging.DEBUG, "gateway.fuse_mount")
    assert owner_router(settings(endpoint)) is None
    [line] = warnings(caplog)
    assert line.startswith("not routing requests to the keys' owners: cannot read the "
                           f"cluster ring from {endpoint}/_squall/cluster (")
    assert line.endswith(f"every request goes to {endpoint}")
    with pytest.raises(ClientFailure, match="--route-to-owners: cannot read the cluster ring"):
        owner_router(settings(endpoint, True))
    caplog.clear()
    assert owner_router(settings(endpoint, False)) is None
    assert caplog.records == []
    # A ring that cannot be read again while the mount runs: the last one is kept.
    router = OwnerRouter(endpoint, ["http://127.0.0.1:1", "http://127.0.0.1:2"],
                         ring_reader(settings(endpoint)))
    router.refresh()
    assert router.hosts == ("http://127.0.0.1:1", "http://127.0.0.1:2")
    assert warnings(caplog) == []


def test_a_cluster_is_routed_like_its_members_route(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster(tmp_path, status_token=TOKEN).start()
    try:
        caplog.set_level(logging.INFO, "gateway.fuse_mount")
        for route in (None, True):
            router = owner_router(settings(cluster.nodes[1].endpoint, route))
            assert router is not None
            assert router.hosts == tuple(sorted(cluster.urls))
            assert_routes_like_the_members(router, cluster, [0, 1, 2])
        assert warnings(caplog) == []
        assert owner_router(settings(cluster.nodes[1].endpoint, False)) is None
    finally:
        cluster.stop()


def test_a_member_out_of_reach(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """At mount time (automatic): one warning, every request to the endpoint. While the
    mount runs: that member's keys go to the endpoint until it can be reached again."""
    cluster = Cluster(tmp_path, size=2, status_token=TOKEN).start()
    try:
        cluster.nodes[1].stop()
        endpoint, away = cluster.nodes[0].endpoint, cluster.urls[1]
        caplog.set_level(logging.INFO, "gateway.fuse_mount")
        assert owner_router(settings(endpoint)) is None
        [line] = warnings(caplog)
        assert line.startswith(f"not routing requests to the keys' owners: cluster member "
                               f"{away} is not reachable from here (Connection refused)")
        assert line.endswith(f"every request goes to {endpoint}")
        explicit = owner_router(settings(endpoint, True))  # as asked: not probed
        assert explicit is not None and explicit.owner(BUCKET, "k") in cluster.urls

        caplog.clear()
        running = OwnerRouter(endpoint, [cluster.urls[0]], ring_reader(settings(endpoint)))
        running.refresh()  # member 1 new in the ring, and out of reach
        assert running.hosts == tuple(sorted(cluster.urls))
        [line] = warnings(caplog)
        assert line.startswith(f"cluster member {away} is not reachable from here")
        theirs = cluster.key_owned_by(1, BUCKET)
        assert running.owner(BUCKET, theirs) == endpoint
        ours = cluster.key_owned_by(0, BUCKET)
        assert running.owner(BUCKET, ours) == cluster.urls[0]

        cluster.nodes[1].start()
        running.refresh()
        assert running.owner(BUCKET, theirs) == away
        assert_routes_like_the_members(running, cluster, [0, 1])
    finally:
        cluster.stop()


def test_every_member_out_of_reach_is_named_with_why() -> None:
    closed = [f"http://127.0.0.1:{free_port()}" for _ in range(3)]
    found = unreachable([*closed, "http://no-such-member.invalid:9000"], timeout=1.0)
    assert set(found) == {*closed, "http://no-such-member.invalid:9000"}
    assert all(found[url] == "Connection refused" for url in closed)


def test_the_ring_is_read_again_as_the_cluster_grows(tmp_path: Path,
                                                     etcd: EtcdServer) -> None:
    cluster = Cluster(tmp_path, size=2, coordinator=etcd.url, status_token=TOKEN).start()
    routers: list[OwnerRouter] = []
    try:
        endpoint = cluster.nodes[0].endpoint
        first = owner_router(settings(endpoint))
        assert first is not None and first.hosts == tuple(sorted(cluster.urls))
        read = ring_reader(settings(endpoint))
        periodic = OwnerRouter(endpoint, first.hosts, read, interval=0.2)
        # Read again only when a request to an owner fails (and not twice within 2 s).
        on_failure = OwnerRouter(endpoint, first.hosts, read, interval=3600)
        routers += [periodic, on_failure]
        for router in routers:
            router.start()
        cluster.add()
        cluster.wait_members([0, 1, 2])
        deadline = time.monotonic() + 20
        while len(periodic.hosts) < 3 or len(on_failure.hosts) < 3:
            assert time.monotonic() < deadline, (periodic.hosts, on_failure.hosts)
            on_failure.suspect()
            time.sleep(0.1)
        for router in routers:
            assert router.hosts == tuple(sorted(cluster.urls))
            assert_routes_like_the_members(router, cluster, [0, 1, 2])
    finally:
        for router in routers:
            router.stop()
        cluster.stop()
