"""Three real ``squall serve`` members on loopback ports over one shared posix backend."""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.cluster.ring import Ring, owner_index, worker_index
from tests.conftest import make_client
from tests.support.server import SquallProcess, free_port

SECRET = "cluster-secret-for-the-tests"
# The backend takes one byte per second: what is written stays unflushed in its owner's
# cache for the whole test, so reads and listings prove the cluster, not the backend.
SLOW_BACKEND = ("--backend-bandwidth", "1B/s", "--inactivity-delay", "3600")


class Cluster:
    def __init__(self, root: Path, size: int = 3, args: Sequence[str] = (), *,
                 status_token: str | None = None, peers_file: Path | None = None) -> None:
        """``status_token``: the status views closed (the gateway's default) and read
        with this bearer token; else open to unsigned reads. ``peers_file``: the members
        read the list from this file (written here) instead of ``--peers``."""
        self.peers_file = peers_file
        self.root = root
        self.args = tuple(args)
        self.status_token = status_token
        ports = [free_port() for _ in range(size)]
        self.urls = [f"http://127.0.0.1:{p}" for p in ports]
        if peers_file is not None:
            peers_file.write_text("\n".join(self.urls) + "\n")
        self.nodes = [self.member(i, ports[i], args) for i in range(size)]
        self.clients: list[Any] = []

    def member(self, node: int, port: int, args: Sequence[str]) -> SquallProcess:
        token = ["--status-token", self.status_token] if self.status_token else []
        peers = ["--peers", ",".join(self.urls)] if self.peers_file is None \
            else ["--peers-file", str(self.peers_file)]
        return SquallProcess(self.root / f"node{node}", [
            "--backend", f"posix:{self.root / 'shared'}", *peers,
            "--node-id", str(node), "--min-part-size", "1024", *token, *args],
            env={"SQUALL_CLUSTER_SECRET": SECRET}, port=port,
            public_status=self.status_token is None)

    def start(self) -> Cluster:
        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda n: n.start(), self.nodes))
        self.clients = [make_client(n.endpoint) for n in self.nodes]
        return self

    def stop(self) -> None:
        codes = [n.stop() for n in self.nodes]
        assert codes == [0] * len(codes), [n.log() for n in self.nodes]

    def wait_health(self, node: int, expected: list[str], timeout: float = 30.0) -> None:
        """Wait until member ``node`` reports ``expected`` (per member) in its ring view.
        With --workers N every worker keeps its own health checks and a new connection
        goes to any of them: the view must then agree 8 x N times in a row."""
        deadline = time.monotonic() + timeout
        agreed, needed = 0, 1 if self.nodes[node].workers == 1 else 8 * self.nodes[node].workers
        while agreed < needed:
            view = httpx.get(f"{self.nodes[node].endpoint}/_squall/cluster").json()
            seen = [m["health"] for m in view["members"]]
            if seen == expected:
                agreed += 1
                continue
            agreed = 0
            assert time.monotonic() < deadline, seen
            time.sleep(0.1)

    def owner(self, bucket: str, key: str) -> int:
        return owner_index(self.urls, bucket, key)

    def ring(self, member: int) -> Ring:
        """The ring as member ``member`` has it (the hosts' workers, with --workers N)."""
        workers = self.nodes[0].workers
        return Ring.of_hosts(self.urls, member // workers, workers, member % workers)

    def serving_member(self, host: int, bucket: str, key: str) -> int:
        """The ring member on host ``host`` that serves ``key`` there."""
        workers = self.nodes[0].workers
        return host * workers + worker_index(workers, bucket, key)

    def key_owned_by(self, node: int, bucket: str, prefix: str = "k") -> str:
        return next(f"{prefix}-{i}" for i in range(1000)
                    if self.owner(bucket, f"{prefix}-{i}") == node)

    def forwarded(self) -> float:
        """Requests the members have forwarded to an owner, in all."""
        total = 0.0
        auth = {"Authorization": f"Bearer {self.status_token}"} if self.status_token else {}
        for node in self.nodes:
            metrics = httpx.get(f"{node.endpoint}/_squall/metrics", headers=auth)
            metrics.raise_for_status()
            for line in metrics.text.splitlines():
                if line.startswith("squall_cluster_forwarded_requests_total"):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def status(self, node: int) -> dict[str, Any]:
        """Member ``node``'s status; with workers, ``dirty_objects`` of all of them."""
        view: dict[str, Any] = httpx.get(
            f"{self.nodes[node].endpoint}/_squall/status?workers=all").json()
        if "workers" in view:
            view["dirty_objects"] = sum(w.get("dirty_objects", 0) for w in view["workers"])
        return view


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("cluster"), args=SLOW_BACKEND).start()
    yield running
    running.stop()


@pytest.fixture
def cbucket(cluster: Cluster) -> str:
    name = f"c-{uuid.uuid4().hex[:12]}"
    cluster.clients[0].create_bucket(Bucket=name)
    return name
