"""Mounts of clusters: without any flag every object request goes straight to the key's
owner (no member forwards one); with ``--no-route-to-owners``, or when a member cannot
be reached from the mount, every request goes to the endpoint (members forward them);
a single gateway is not routed. What a mount writes is read back through every member."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.cluster.conftest import Cluster
from tests.gateway.fuse_mount.conftest import MountProcess, mount_env, unmount
from tests.support.server import SquallProcess

MiB = 1024 * 1024
TOKEN = "a-status-token-of-24-chars"
ROUTING = "routing object requests to their owners"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # The status views closed, as by default: the mount signs its read of the ring.
    running = Cluster(tmp_path_factory.mktemp("cluster"), status_token=TOKEN).start()
    yield running
    running.stop()


@pytest.fixture
def cbucket(cluster: Cluster) -> str:
    name = f"m-{uuid.uuid4().hex[:12]}"
    cluster.clients[0].create_bucket(Bucket=name)
    return name


def write_and_read(mount: Path) -> dict[str, bytes]:
    """Small files and one multipart file (its upload's requests), read back."""
    files = {f"run/rank-{i}.ckpt": os.urandom(1000 + i) for i in range(12)}
    files["run/big.ckpt"] = os.urandom(12 * MiB)
    (mount / "run").mkdir()
    for name, data in files.items():
        (mount / name).write_bytes(data)
    for name, data in files.items():
        assert (mount / name).read_bytes() == data
    assert sorted(os.listdir(mount / "run")) == sorted(name.split("/")[1] for name in files)
    return files


def assert_stored(cluster: Cluster, bucket: str, files: dict[str, bytes]) -> None:
    assert {cluster.owner(bucket, name) for name in files} == {*range(len(cluster.nodes))}
    for client in cluster.clients:
        for name, data in files.items():
            assert client.get_object(Bucket=bucket, Key=name)["Body"].read() == data


def test_a_mount_routes_to_the_owners_by_default(cluster: Cluster, cbucket: str,
                                                 tmp_path: Path) -> None:
    mount = MountProcess(cluster.nodes[0].endpoint, cbucket, tmp_path / "mnt").start()
    try:
        before = cluster.forwarded()
        files = write_and_read(mount.path)
        assert cluster.forwarded() == before  # no request took the extra hop
    finally:
        assert mount.stop() == 0, mount.log()
    assert ROUTING in mount.log() and "WARNING" not in mount.log()
    assert_stored(cluster, cbucket, files)


def test_no_route_to_owners_sends_everything_to_the_endpoint(cluster: Cluster, cbucket: str,
                                                             tmp_path: Path) -> None:
    """In background mode: the choice is passed on to the process that serves."""
    mnt, log = tmp_path / "mnt", tmp_path / "mount.log"
    mnt.mkdir()
    started = subprocess.run(
        [sys.executable, "-m", "gateway.fuse_mount", cluster.nodes[0].endpoint, cbucket,
         str(mnt), "--no-route-to-owners", "--background", "--log-level", "debug",
         "--log-file", str(log)], env=mount_env(), capture_output=True, text=True,
        timeout=120, check=False)
    assert started.returncode == 0, started.stderr
    try:
        before = cluster.forwarded()
        files = write_and_read(mnt)
        assert cluster.forwarded() > before  # the endpoint forwarded the others' keys
    finally:
        unmount(mnt)
    text = log.read_text()
    assert ROUTING not in text and "cluster ring" not in text, text
    assert_stored(cluster, cbucket, files)


def test_a_member_out_of_reach_sends_everything_to_the_endpoint(tmp_path: Path) -> None:
    """Member 1 cannot be reached when the mount starts: one warning, and the mount works
    through its endpoint (which forwards member 1's keys once it is back)."""
    cluster = Cluster(tmp_path, size=2, status_token=TOKEN).start()
    try:
        cluster.clients[0].create_bucket(Bucket="away")
        cluster.nodes[1].stop()
        mount = MountProcess(cluster.nodes[0].endpoint, "away", tmp_path / "mnt").start()
        try:
            cluster.nodes[1].start()
            before = cluster.forwarded()
            files = write_and_read(mount.path)
            assert cluster.forwarded() > before
        finally:
            assert mount.stop() == 0, mount.log()
        warnings = [line for line in mount.log().splitlines() if " WARNING " in line]
        assert len(warnings) == 1, mount.log()
        assert (f"not routing requests to the keys' owners: cluster member {cluster.urls[1]} "
                f"is not reachable from here (Connection refused); every request goes to "
                f"{cluster.nodes[0].endpoint}") in warnings[0]
        assert ROUTING not in mount.log()
        assert_stored(cluster, "away", files)
    finally:
        cluster.stop()


def test_a_single_gateway_is_not_routed(squall: SquallProcess, mount_bucket: str,
                                        tmp_path: Path) -> None:
    mount = MountProcess(squall.endpoint, mount_bucket, tmp_path / "mnt").start()
    try:
        (mount.path / "single.txt").write_text("one gateway")
        assert (mount.path / "single.txt").read_text() == "one gateway"
    finally:
        assert mount.stop() == 0, mount.log()
    assert "is a gateway without peers: every request goes to it" in mount.log()
    assert ROUTING not in mount.log() and "WARNING" not in mount.log()
