"""Real ``squall serve`` members on loopback ports over one shared posix backend,
coordinated by a real etcd (or given a fixed ``--peers`` list)."""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.cluster.peerauth import PeerAuth
from gateway.cluster.view import Member, View, member_id
from tests.conftest import make_client
from tests.support.etcd import EtcdServer
from tests.support.server import SquallProcess, free_port

SECRET = "cluster-secret-for-the-tests"
# The backend takes one byte per second: what is written stays unflushed in its owner's
# cache for the whole test, so reads and listings prove the cluster, not the backend.
SLOW_BACKEND = ("--backend-bandwidth", "1B/s", "--inactivity-delay", "3600")
TTL = 3  # the members' lease TTL (seconds): failures are noticed within it


class Cluster:
    def __init__(self, root: Path, size: int = 3, args: Sequence[str] = (), *,
                 coordinator: str | None = None, status_token: str | None = None,
                 workers: int = 1, lease_ttl: float = TTL) -> None:
        """``coordinator``: etcd's URL (members register there; a prefix of this
        cluster's own; leases of ``lease_ttl`` seconds), else a fixed ``--peers`` list.
        ``status_token``: the status views closed (the gateway's default) and read with
        this bearer token; else open."""
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.args = tuple(args)
        self.coordinator = coordinator
        self.prefix = f"/squall-test-{uuid.uuid4().hex[:12]}/"
        self.status_token = status_token
        self.workers = workers
        self.lease_ttl = lease_ttl
        ports = [free_port() for _ in range(size)]
        self.urls = [f"http://127.0.0.1:{p}" for p in ports]
        self.nodes = [self.member(i, ports[i], args) for i in range(size)]
        self.clients: list[Any] = []

    def member(self, node: int, port: int, args: Sequence[str] = ()) -> SquallProcess:
        """Member ``node`` (listening on ``port``); not started."""
        token = ["--status-token", self.status_token] if self.status_token else []
        if self.coordinator is not None:
            placement = ["--coordinator", self.coordinator, "--coordinator-prefix",
                         self.prefix, "--lease-ttl", str(self.lease_ttl)]
        else:
            placement = ["--peers", ",".join(self.urls), "--node-id", str(node)]
        workers = ["--workers", str(self.workers)] if self.workers > 1 else []
        return SquallProcess(self.root / f"node{node}", [
            "--backend", f"posix:{self.root / 'shared'}", *placement, *workers,
            "--min-part-size", "1024", "--log-level", "info", *token, *args],
            env={"SQUALL_CLUSTER_SECRET": SECRET}, port=port,
            public_status=self.status_token is None)

    def start(self) -> Cluster:
        with concurrent.futures.ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda n: n.start(), self.nodes))
        self.clients = [make_client(n.endpoint) for n in self.nodes]
        if self.coordinator is not None:
            self.wait_members(list(range(len(self.nodes))))
        return self

    def stop(self) -> None:
        codes = [n.stop() for n in self.nodes]
        assert codes == [0] * len(codes), [n.log() for n in self.nodes]

    def add(self, args: Sequence[str] = ()) -> int:
        """Start one more member (with a coordinator: it joins); its index."""
        port = free_port()
        self.urls.append(f"http://127.0.0.1:{port}")
        node = self.member(len(self.nodes), port, (*self.args, *args)).start()
        self.nodes.append(node)
        self.clients.append(make_client(node.endpoint))
        return len(self.nodes) - 1

    def view(self, node: int) -> dict[str, Any]:
        auth = {"Authorization": f"Bearer {self.status_token}"} if self.status_token else {}
        answer = httpx.get(f"{self.nodes[node].endpoint}/_squall/cluster", headers=auth,
                           timeout=10)
        answer.raise_for_status()
        ring: dict[str, Any] = answer.json()
        return ring

    def wait_members(self, members: list[int], *, seen_by: list[int] | None = None,
                     timeout: float = 60.0) -> None:
        """Wait until every member of ``seen_by`` (default: ``members``) has the ring of
        exactly ``members`` (their hosts), has handed its keys over and serves."""
        wanted = sorted(self.urls[i] for i in members)
        deadline = time.monotonic() + timeout
        for node in seen_by if seen_by is not None else members:
            while True:
                view = self.view(node)
                hosts = sorted({m["url"] for m in view["members"]})
                if hosts == wanted and view["serving"] and (
                        view.get("handed_over") == view["revision"] or not self.coordinator):
                    break
                assert time.monotonic() < deadline, (
                    (f"member {node}: hosts {hosts}, serving {view['serving']}, revision "
                     f"{view['revision']}, handed over {view.get('handed_over')}"), view,
                    self._cluster_log(node))
                time.sleep(0.1)

    def _cluster_log(self, node: int) -> str:
        """The cluster's lines in member ``node``'s log (its access lines left out)."""
        try:
            text = self.nodes[node].log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join([line for line in text.splitlines()
                          if "squall.access" not in line][-60:])

    def _view(self, members: Sequence[int] | None = None) -> View:
        hosts = [self.urls[i] for i in (members if members is not None
                                         else range(len(self.urls)))]
        ring = {m.name: m for h in hosts for m in
                (Member.of(h, k, self.workers) for k in range(self.workers))}
        return View(1, ring, next(iter(ring)))

    def owner(self, bucket: str, key: str, members: Sequence[int] | None = None) -> int:
        """The index of the member (host) owning ``key`` among ``members`` (default:
        every member started)."""
        owner = self._view(members).owner(bucket, key)
        assert owner is not None
        return self.urls.index(self._view(members).members[owner].host)

    def serving_member(self, host: int, bucket: str, key: str) -> int:
        """The worker of host ``host`` that serves ``key`` there."""
        view = self._view()
        name = next(n for n in view.preference(bucket, key)
                    if view.members[n].host == self.urls[host])
        return view.members[name].worker

    def key_owned_by(self, node: int, bucket: str, prefix: str = "k",
                     members: Sequence[int] | None = None) -> str:
        return next(f"{prefix}-{i}" for i in range(10_000)
                    if self.owner(bucket, f"{prefix}-{i}", members) == node)

    def sign(self, node: int, method: str, path: bytes, query: bytes, *,
             worker: int = 0) -> str:
        """A peer marker for a request to member ``node`` (its worker ``worker``), as
        member 0 signs it under member ``node``'s current view."""
        auth = PeerAuth(SECRET.encode(), member=member_id(self._name(0, 0)))
        return auth.sign(method, path, query, member_id(self._name(node, worker)),
                         str(self.view(node)["revision"] or ""))

    def _name(self, node: int, worker: int) -> str:
        return Member.of(self.urls[node], worker, self.workers).name

    def forwarded(self, *, other_hosts: bool = False) -> float:
        """Requests the members have forwarded to an owner, in all; with ``other_hosts``
        only those sent to another host (not those a host's worker passes to another of
        its workers, which hand-over falls back to at times: docs/workers.md)."""
        total = 0.0
        auth = {"Authorization": f"Bearer {self.status_token}"} if self.status_token else {}
        for url, node in zip(self.urls, self.nodes, strict=True):
            if node.proc is None or node.proc.poll() is not None:
                continue
            metrics = httpx.get(f"{node.endpoint}/_squall/metrics", headers=auth)
            metrics.raise_for_status()
            for line in metrics.text.splitlines():
                if not line.startswith("squall_cluster_forwarded_requests_total"):
                    continue
                member = line.partition('member="')[2].partition('"')[0]
                if other_hosts and member.partition("/worker-")[0] == url:
                    continue
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
def cluster(tmp_path_factory: pytest.TempPathFactory, etcd: EtcdServer) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("cluster"), args=SLOW_BACKEND,
                      coordinator=etcd.url).start()
    yield running
    running.stop()


@pytest.fixture
def cbucket(cluster: Cluster) -> str:
    name = f"c-{uuid.uuid4().hex[:12]}"
    cluster.clients[0].create_bucket(Bucket=name)
    return name
