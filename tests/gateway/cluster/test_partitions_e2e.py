"""Partitions as a real network makes them: three members and a three-node etcd, each in a
network namespace of its own on one bridge, a client in another; links are cut with
nftables (packets dropped: open connections stall, as on a real network) and etcd
members are killed, while the client writes and reads a few keys through every member
(tests/gateway/cluster/history.py records and checks it).

Every fault, then a heal: no acknowledged write is lost, no read returns a value older
than a write acknowledged before the read began, every error is a 503 with Retry-After,
and a member cut off from the others and from etcd acknowledges no write once its lease
could have expired.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadtests.netns import Host, Network, netns_available
from tests.gateway.cluster.conftest import SECRET
from tests.gateway.cluster.history import check, read_ops
from tests.support.etcd import EtcdCluster, etcd_available
from tests.support.server import ACCESS_KEY, SECRET_KEY

ROOT = Path(__file__).resolve().parents[3]
TTL = 3
PORT = 9000
BUCKET = "partitions"
LOAD_S = 40.0
FAULT_AT_S = 6.0
FAULT_S = 20.0

reason = netns_available() or etcd_available()
pytestmark = [pytest.mark.skipif(reason is not None, reason=str(reason)),
              pytest.mark.timeout(240)]


class Site:
    """The namespaces, etcd and the members of one test."""

    def __init__(self, net: Network, root: Path) -> None:
        self.net = net
        self.root = root
        self.etcd_hosts = [net.add_host(f"e{i}") for i in range(3)]
        self.member_hosts = [net.add_host(f"m{i}") for i in range(3)]
        self.client = net.add_host("client")
        self.etcd = EtcdCluster(root / "etcd", hosts=self.etcd_hosts).start()
        self.members = [self._start(i) for i in range(3)]

    @property
    def endpoints(self) -> list[str]:
        return [f"http://{h.address}:{PORT}" for h in self.member_hosts]

    def _start(self, i: int) -> object:
        host = self.member_hosts[i]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_", "AWS_"))}
        env.update(SQUALL_ACCESS_KEY=ACCESS_KEY, SQUALL_SECRET_KEY=SECRET_KEY,
                   SQUALL_CLUSTER_SECRET=SECRET, SQUALL_PUBLIC_STATUS="true")
        log = open(self.root / f"m{i}.log", "ab")  # noqa: SIM115 - closed with the process
        return host.popen(
            [sys.executable, "-m", "gateway.commands.cli", "serve", "--listen", f"{host.address}:{PORT}",
             "--data-dir", str(self.root / f"m{i}"), "--backend",
             f"posix:{self.root / 'shared'}", "--coordinator", self.etcd.url,
             "--lease-ttl", str(TTL), "--dirty-replicas", "2", "--backend-bandwidth", "20KB/s",
             "--inactivity-delay", "3600", "--log-level", "info", "--no-access-log"],
            cwd=ROOT, env=env, stdout=log, stderr=log)

    def client_run(self, *args: str, timeout: float) -> None:
        result = self.client.run([sys.executable, "-m", "tests.gateway.cluster.history",
                                  *args, "--endpoints", ",".join(self.endpoints),
                                  "--bucket", BUCKET], cwd=ROOT, capture_output=True,
                                 text=True, timeout=timeout)
        assert result.returncode == 0, result.stderr[-3000:] + self.logs()

    def load(self, out: Path) -> object:
        return self.client.popen([sys.executable, "-m", "tests.gateway.cluster.history", "load",
                                  "--endpoints", ",".join(self.endpoints), "--bucket", BUCKET,
                                  "--seconds", str(LOAD_S), "--out", str(out)], cwd=ROOT)

    def cut_off(self, host: Host) -> None:
        """``host`` loses every link but the client's: the other members and etcd."""
        for other in (*self.member_hosts, *self.etcd_hosts):
            if other is not host:
                self.net.cut(host, other)

    def logs(self) -> str:
        return "".join(f"\n--- m{i}:\n" + (self.root / f"m{i}.log").read_text(
            errors="replace")[-3000:] for i in range(3))

    def close(self) -> None:
        for proc in self.members:
            proc.kill()  # type: ignore[attr-defined]
            proc.wait()  # type: ignore[attr-defined]
        self.etcd.close()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    with Network() as net:
        running = Site(net, tmp_path)
        try:
            running.client_run("ready", timeout=90)
            yield running
        finally:
            running.close()


def _run(site: Site, tmp_path: Path, fault: str) -> tuple[float, float]:
    """Load with the fault in the middle; (when the fault began, when it ended)."""
    history = tmp_path / "history.jsonl"
    load = site.load(history)
    time.sleep(FAULT_AT_S)
    began = time.monotonic()
    if fault == "member":
        site.cut_off(site.member_hosts[0])
    elif fault == "etcd-leader":
        leader = site.etcd.leader()
        site.etcd.kill(leader)
    else:  # one etcd member (the leader: the worst one) cut off from every host
        leader = site.etcd.leader()
        site.net.isolate(site.etcd_hosts[leader])
    time.sleep(FAULT_S)
    ended = time.monotonic()
    if fault == "etcd-leader":
        site.etcd.restart(leader)
    else:
        site.net.heal()
    load.wait(timeout=LOAD_S + 60)  # type: ignore[attr-defined]
    site.client_run("ready", timeout=90)
    site.client_run("final", "--out", str(tmp_path / "final.jsonl"), timeout=120)
    return began, ended


@pytest.mark.parametrize("fault", ["member", "etcd-leader", "etcd-member"])
def test_no_lost_write_and_no_stale_read_across_a_fault(site: Site, tmp_path: Path,
                                                        fault: str) -> None:
    began, ended = _run(site, tmp_path, fault)
    history = read_ops(tmp_path / "history.jsonl")
    verdict = check(history, read_ops(tmp_path / "final.jsonl"),
                    fenced=0 if fault == "member" else None, cut=(began, ended), ttl=TTL)
    assert verdict.acknowledged_writes > 100, verdict
    assert verdict.problems == [], ("\n".join(verdict.problems[:10]), verdict.errors,
                                    site.logs())
    if fault == "member":  # the cut-off member refused writes while it was cut off
        # (answered once it could no longer hold its lease: a request begun before may
        # have waited on a forward to a member it can no longer reach)
        refused = [op for op in history if op.via == 0 and op.kind == "put"
                   and op.start < ended and op.end > began + TTL and op.status == 503]
        assert refused, verdict.errors
        served = [op for op in history if op.via != 0 and began + 2 * TTL < op.start < ended
                  and op.status == 200]
        assert served  # the others went on, the cut-off member's keys included
    for i in range(3):
        assert "Traceback" not in (tmp_path / f"m{i}.log").read_text(errors="replace"), \
            site.logs()
