"""A cluster of hosts that each run ``--workers 2``, coordinated by a real etcd: two real
members on loopback ports, each a parent and two worker processes (each worker a member
with a lease of its own), over one shared posix backend whose throttle keeps every write
unflushed (reads prove the owners and their copies, not the backend). Hosts of workers
join and leave while the others run.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from gateway.cluster.client import fetch_ring, owner_url, route_to_owners
from tests.conftest import make_client
from tests.gateway.cluster.conftest import Cluster
from tests.support.etcd import EtcdServer
from tests.support.server import ACCESS_KEY, SECRET_KEY

BUCKET = "hosts-of-workers"
THROTTLED = ("--backend-bandwidth", "1B/s", "--inactivity-delay", "3600",
             "--cache-admission", "cache")


@pytest.fixture
def hosts(request: pytest.FixtureRequest, tmp_path: Path, etcd: EtcdServer
          ) -> Iterator[Cluster]:
    extra = getattr(request, "param", ())
    running = Cluster(tmp_path, size=2, args=(*THROTTLED, *extra), coordinator=etcd.url,
                      workers=2).start()
    running.clients[0].create_bucket(Bucket=BUCKET)
    yield running
    for node in running.nodes:
        if node.proc is not None and node.proc.poll() is None:
            node.stop()


def _workers(cluster: Cluster, node: int) -> list[dict[str, Any]]:
    status = httpx.get(f"{cluster.nodes[node].endpoint}/_squall/status?workers=all",
                       timeout=10).json()
    return status["workers"]  # type: ignore[no-any-return]


def _write(cluster: Cluster, count: int, tag: bytes) -> dict[str, bytes]:
    written = {f"obj-{i:03d}": tag + os.urandom(32 + i) for i in range(count)}

    def put(item: tuple[int, tuple[str, bytes]]) -> None:
        index, (key, body) = item
        cluster.clients[index % 2].put_object(Bucket=BUCKET, Key=key, Body=body)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(put, enumerate(written.items())))
    return written


def _get(s3: Any, key: str, timeout: float = 30.0) -> bytes:
    """The object's body; a 503 (its owner died: until its lease expires, or it is back)
    is tried again, as S3 clients do."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()  # type: ignore[no-any-return]
        except ClientError as exc:
            status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
            if status != 503 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _read_all(cluster: Cluster, node: int, expected: dict[str, bytes]) -> None:
    s3 = cluster.clients[node]
    for key, body in expected.items():
        assert _get(s3, key) == body, key
    listed = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, PaginationConfig={"PageSize": 17}) for o in page.get("Contents", [])]
    assert listed == sorted(expected)


# Without hand-over, another host's requests reach their worker through the relay.
@pytest.mark.parametrize("hosts", [(), ("--no-worker-handover",)], indirect=True,
                         ids=["handover", "relay"])
def test_every_worker_of_every_host_owns_keys_read_anywhere(hosts: Cluster) -> None:
    written = _write(hosts, 120, b"v1 ")
    for node in range(2):
        # every worker holds unflushed writes of its own keys (and copies of others')
        assert all(w["dirty_objects"] > 0 for w in _workers(hosts, node))
        _read_all(hosts, node, written)
    s3 = hosts.clients
    s3[0].put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    versions = [s3[i % 2].put_object(Bucket=BUCKET, Key="versioned", Body=b"%d" % i)
                ["VersionId"] for i in range(6)]
    listed = s3[1].list_object_versions(Bucket=BUCKET, Prefix="versioned")["Versions"]
    assert [v["VersionId"] for v in listed] == versions[::-1]
    assert s3[0].get_object(Bucket=BUCKET, Key="versioned",
                            VersionId=versions[2])["Body"].read() == b"2"


def test_clients_see_the_hosts_and_route_to_them(hosts: Cluster) -> None:
    """The ring view names the hosts (a client finds a key's host, which passes the
    request to the key's worker there): routed requests never go to another host."""
    ring = fetch_ring(hosts.nodes[1].endpoint)
    assert sorted(m["url"] for m in ring["members"]) == sorted(hosts.urls * 2)
    assert {(m["url"], m["worker"], m["workers"]) for m in ring["members"]} == {
        (url, k, 2) for url in hosts.urls for k in range(2)}
    assert ring["self"] in {f"{hosts.urls[1]}/worker-{k}" for k in range(2)}
    for key in ("a", "b/c", "d e"):
        assert owner_url(ring, BUCKET, key) == hosts.urls[hosts.owner(BUCKET, key)]
    s3 = make_client(hosts.nodes[0].endpoint)
    route_to_owners(s3, ring)
    before = hosts.forwarded(other_hosts=True)
    for i in range(12):
        s3.put_object(Bucket=BUCKET, Key=f"routed/{i}", Body=b"direct")
        assert s3.get_object(Bucket=BUCKET, Key=f"routed/{i}")["Body"].read() == b"direct"
    assert hosts.forwarded(other_hosts=True) == before


def test_kill_9_of_a_worker_then_of_a_host_loses_no_acknowledged_write(
        hosts: Cluster) -> None:
    written = _write(hosts, 80, b"before ")
    victim = _workers(hosts, 0)[1]["worker"]["pid"]
    os.kill(victim, signal.SIGKILL)  # its parent starts it again; its keys meanwhile
    _read_all(hosts, 1, written)     # are served by their copies on the other host
    assert _workers(hosts, 0)[1]["worker"]["pid"] != victim
    _read_all(hosts, 0, written)

    rewritten = {**written, **_write(hosts, 40, b"after ")}
    hosts.nodes[1].kill()  # the whole host: its parent, and with it both workers
    hosts.wait_members([0])
    _read_all(hosts, 0, rewritten)
    hosts.nodes[1].start()
    hosts.clients[1] = make_client(hosts.nodes[1].endpoint)
    hosts.wait_members([0, 1])
    _read_all(hosts, 1, rewritten)


def test_a_host_of_workers_joins_and_leaves_live(hosts: Cluster) -> None:
    written = _write(hosts, 60, b"three ")
    third = hosts.add()  # it registers its workers: keys move to them, nothing stops
    hosts.wait_members([0, 1, 2])
    assert all(w["dirty_objects"] >= 0 for w in _workers(hosts, third))
    for node in range(3):
        _read_all(hosts, node, written)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_", "AWS_"))}
    env.update(SQUALL_ACCESS_KEY=ACCESS_KEY, SQUALL_SECRET_KEY=SECRET_KEY)
    result = subprocess.run(
        [sys.executable, "-m", "gateway.commands.cli", "cluster", "leave", "--endpoint",
         hosts.nodes[0].endpoint], capture_output=True, text=True, timeout=120,
        check=False, env=env)
    assert result.returncode == 0, result.stderr
    hosts.wait_members([1, 2])  # host 0's workers handed their writes over and left
    for node in (1, 2):
        _read_all(hosts, node, written)
    _read_all(hosts, 0, written)  # the host that left forwards what it is sent
