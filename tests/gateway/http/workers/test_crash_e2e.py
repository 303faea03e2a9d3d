"""SIGKILL a worker, or the whole gateway, mid-writes: every acknowledged write survives."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from botocore.exceptions import ClientError

from tests.gateway.http.workers.conftest import (
    SLOW_BACKEND,
    keys_of,
    owner,
    start,
    wait_healthy,
    workers_status,
)
from tests.gateway.http.workers.writers import Writers, check_all, one_attempt_client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


def test_a_killed_worker_is_restarted_and_loses_nothing(tmp_path: Path) -> None:
    server = start(tmp_path, *SLOW_BACKEND)
    try:
        one_attempt_client(server.endpoint).create_bucket(Bucket="burst")
        pids = _pids(server)
        writers = Writers(server.endpoint, "burst").start()
        writers.wait_for(60)
        os.kill(pids[1], signal.SIGKILL)
        # Its keys answer 503 until it is back; the other worker's keys are served.
        probe = one_attempt_client(server.endpoint)
        mine, theirs = keys_of(0, "burst", 1, "p")[0], keys_of(1, "burst", 1, "p")[0]
        probe.put_object(Bucket="burst", Key=mine, Body=b"alive")
        try:
            probe.put_object(Bucket="burst", Key=theirs, Body=b"down")
            # Acknowledged: only possible once the worker is back (a new process).
            assert _pids(server)[1] != pids[1], "a dead worker's key took a write"
        except ClientError as exc:
            assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        health = httpx.get(f"{server.endpoint}/_squall/health", timeout=10)
        if health.status_code != 200:  # (unless the restart was quicker than this check)
            assert health.status_code == 503
            assert health.json()["workers"][1]["status"] == "down"
        wait_healthy(server)
        assert _pids(server)[0] == pids[0] and _pids(server)[1] != pids[1]
        count = len(writers.acked)
        writers.wait_for(count + 40)
        acked = writers.stop()
        assert {owner("burst", k) for k in acked} == {0, 1}
        check_all(server.endpoint, "burst", acked)
        assert all(w["dirty_objects"] > 0 for w in workers_status(server))
    finally:
        assert server.stop() == 0, server.log()


def test_kill_the_whole_gateway_then_restart(tmp_path: Path) -> None:
    server = start(tmp_path, *SLOW_BACKEND)
    one_attempt_client(server.endpoint).create_bucket(Bucket="burst")
    pids = _pids(server)
    writers = Writers(server.endpoint, "burst").start()
    writers.wait_for(60)
    assert server.proc is not None
    for pid in [*pids, server.proc.pid]:
        os.kill(pid, signal.SIGKILL)
    server.proc.wait()
    acked = writers.stop()
    _wait_gone(pids)
    server = start(tmp_path)  # the same data dir, no throttle
    try:
        check_all(server.endpoint, "burst", acked)
        sync = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "sync", "--endpoint",
                               server.endpoint], capture_output=True, text=True, timeout=120,
                              check=False, env={**os.environ, "SQUALL_ACCESS_KEY": ACCESS_KEY,
                                                "SQUALL_SECRET_KEY": SECRET_KEY})
        assert sync.returncode == 0, sync.stderr
        assert [w["dirty_bytes"] for w in workers_status(server)] == [0, 0]
        root = tmp_path / "data" / "objects" / "burst"
        for key, body in acked.items():
            assert hashlib.md5((root / key).read_bytes()).digest() == \
                hashlib.md5(body).digest(), key
    finally:
        assert server.stop() == 0, server.log()


def test_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    server = start(tmp_path)
    one_attempt_client(server.endpoint).create_bucket(Bucket="orphans")
    pids = _pids(server)
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGKILL)  # the parent only
    server.proc.wait()
    _wait_gone(pids)  # no worker serves on without its supervisor
    server = start(tmp_path)  # the port and the data directory are free again
    try:
        buckets = one_attempt_client(server.endpoint).list_buckets()["Buckets"]
        assert [b["Name"] for b in buckets] == ["orphans"]
    finally:
        assert server.stop() == 0, server.log()


def _pids(server: SquallProcess) -> list[int]:
    return [w["worker"]["pid"] for w in workers_status(server)]


def _wait_gone(pids: list[int], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    for pid in pids:
        while Path(f"/proc/{pid}").exists():
            assert time.monotonic() < deadline, f"process {pid} still there"
            time.sleep(0.05)
