"""Members join and leave, restart one after another, and die with their disks, while
clients keep writing and reading (tests/gateway/cluster/history.py records and checks
what they saw): no acknowledged write lost, no stale read, every error a 503 with
Retry-After; a join or a leave moves only the keys whose owner changes, and requests for
the others go on without an error. Real members on loopback, a real etcd."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gateway.cluster.conftest import Cluster
from tests.gateway.cluster.history import Op, check, read_ops
from tests.support.etcd import EtcdServer
from tests.support.server import ACCESS_KEY, SECRET_KEY

ROOT = Path(__file__).resolve().parents[3]
BUCKET = "changes"
KEYS = 64
THROTTLED = ("--backend-bandwidth", "50KB/s", "--inactivity-delay", "3600")

pytestmark = pytest.mark.timeout(300)


def _history(*args: str, endpoints: list[str]) -> list[str]:
    return [sys.executable, "-m", "tests.gateway.cluster.history", *args, "--endpoints",
            ",".join(endpoints), "--bucket", BUCKET, "--keys", str(KEYS)]


def _start_load(tmp_path: Path, endpoints: list[str], seconds: float,
                *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(_history("load", "--seconds", str(seconds), "--threads", "6",
                                     "--out", str(tmp_path / "history.jsonl"), *extra,
                                     endpoints=endpoints), cwd=ROOT)


def _finish(cluster: Cluster, tmp_path: Path, load: subprocess.Popen[bytes],
            members: list[int]) -> tuple[list[Op], list[str]]:
    assert load.wait(timeout=240) == 0
    cluster.wait_members(members)
    endpoints = [cluster.urls[i] for i in members]
    subprocess.run(_history("final", "--out", str(tmp_path / "final.jsonl"),
                            endpoints=endpoints), cwd=ROOT, check=True, timeout=240)
    history = read_ops(tmp_path / "history.jsonl")
    verdict = check(history, read_ops(tmp_path / "final.jsonl"))
    assert verdict.acknowledged_writes > 200, verdict
    return history, verdict.problems


def _cluster_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "SQUALL_ACCESS_KEY": ACCESS_KEY,
           "SQUALL_SECRET_KEY": SECRET_KEY}
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", "cluster", *args],
                          capture_output=True, text=True, timeout=300, check=False, env=env,
                          cwd=ROOT)


def test_three_to_five_to_two_members_under_load(tmp_path: Path, etcd: EtcdServer) -> None:
    cluster = Cluster(tmp_path, size=3, args=THROTTLED, coordinator=etcd.url).start()
    try:
        cluster.clients[0].create_bucket(Bucket=BUCKET)
        steady = [cluster.urls[0], cluster.urls[1]]  # members 0 and 1 stay throughout
        load = _start_load(tmp_path, steady, 36.0)
        time.sleep(8)
        changed = time.monotonic()
        for _ in range(2):
            cluster.add()
        cluster.wait_members([0, 1, 2, 3, 4])
        status = _cluster_cli("status", "--coordinator", etcd.url, "--coordinator-prefix",
                              cluster.prefix)
        assert status.returncode == 0, status.stderr
        assert status.stdout.count(": live,") == 5, status.stdout
        time.sleep(4)
        for node in (2, 3, 4):  # as a pod's preStop hook, then the pod stops
            left = _cluster_cli("leave", "--endpoint", cluster.nodes[node].endpoint)
            assert left.returncode == 0, left.stderr
            cluster.nodes[node].stop()
        cluster.wait_members([0, 1])
        done = time.monotonic()
        history, problems = _finish(cluster, tmp_path, load, [0, 1])
        assert problems == [], "\n".join(problems[:10])
        # keys whose owner never changed: no request of theirs failed during the changes
        stayed = {f"reg-{i}" for i in range(KEYS)
                  if len({cluster.owner(BUCKET, f"reg-{i}", members)
                          for members in ([0, 1, 2], [0, 1, 2, 3, 4], [0, 1])}) == 1}
        assert len(stayed) > 5
        during = [op for op in history if op.key in stayed and changed <= op.start <= done]
        assert during and all(op.status == 200 for op in during), \
            [op for op in during if op.status != 200][:5]
        before = [op.end - op.start for op in history
                  if op.key in stayed and op.end < changed and op.status == 200]
        latencies = sorted(op.end - op.start for op in during)
        first = min(op.start for op in history)
        print(f"keys that stayed: p99 {_p99(before) * 1000:.1f} ms before the changes, "
              f"{_p99(latencies) * 1000:.1f} ms during them ({len(during)} requests); "
              f"all keys: {_rate(history, first, changed):.0f} requests/s before, "
              f"{_rate(history, changed, done):.0f}/s during")
    finally:
        for node in cluster.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.stop()


def _rate(history: list[Op], start: float, end: float) -> float:
    """Requests answered 200 per second that started in [start, end)."""
    done = [op for op in history if start <= op.start < end and op.status == 200]
    return len(done) / (end - start) if end > start else 0.0


def _p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else 0.0


def test_a_rolling_restart_under_load(tmp_path: Path, etcd: EtcdServer) -> None:
    """Each member stopped (SIGTERM) and started again in turn: it takes its lease over,
    nothing moves; clients of the member being restarted go to another one. (Leases of
    15 s: a stop and start take a few seconds on a loaded machine.)"""
    cluster = Cluster(tmp_path, size=3, args=THROTTLED, coordinator=etcd.url,
                      lease_ttl=15).start()
    try:
        cluster.clients[0].create_bucket(Bucket=BUCKET)
        load = _start_load(tmp_path, cluster.urls, 30.0, "--failover")
        time.sleep(4)
        for index, node in enumerate(cluster.nodes):
            lease = cluster.view(index)["lease"]
            assert node.stop() == 0
            node.start()
            cluster.wait_members([0, 1, 2])
            assert cluster.view(index)["lease"] == lease  # taken over: nothing moved
            time.sleep(2)
        _, problems = _finish(cluster, tmp_path, load, [0, 1, 2])
        assert problems == [], "\n".join(problems[:10])
    finally:
        cluster.stop()


def test_a_member_killed_with_its_disk_under_load(tmp_path: Path, etcd: EtcdServer) -> None:
    """SIGKILL and the data directory gone: the others serve its keys from their copies
    once its lease has expired; it comes back empty and gets them back."""
    cluster = Cluster(tmp_path, size=3, args=THROTTLED, coordinator=etcd.url).start()
    try:
        cluster.clients[0].create_bucket(Bucket=BUCKET)
        load = _start_load(tmp_path, cluster.urls[:2], 30.0)  # clients of 0 and 1
        time.sleep(6)
        cluster.nodes[2].kill()
        shutil.rmtree(cluster.root / "node2")
        cluster.wait_members([0, 1])
        time.sleep(4)
        cluster.nodes[2].start()
        cluster.wait_members([0, 1, 2])
        _, problems = _finish(cluster, tmp_path, load, [0, 1, 2])
        assert problems == [], "\n".join(problems[:10])
    finally:
        cluster.stop()
