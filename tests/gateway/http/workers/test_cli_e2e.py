"""``squall serve --workers N``: clear CLI errors, worker start failures, graceful stop
with a request in flight, and a change of N on a data directory holding unflushed data."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import make_client
from tests.gateway.http.workers.conftest import SLOW_BACKEND, start, workers_status
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port


def _serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.commands.cli", "serve", "--data-dir", str(tmp_path / "data"),
         "--listen", f"127.0.0.1:{free_port()}", *args],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY,
             **(env or {})})


@pytest.mark.parametrize("value", ["abc", "0", "-1", "1.5", "100000"])
def test_bad_worker_counts(tmp_path: Path, value: str) -> None:
    result = _serve(tmp_path, "--workers", value)
    assert result.returncode == 2
    assert "--workers: must be auto or a whole number of processes from 1 to 256" \
        in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_worker_count_in_the_environment(tmp_path: Path) -> None:
    result = _serve(tmp_path, env={"SQUALL_WORKERS": "0"})
    assert result.returncode == 2
    assert ("SQUALL_WORKERS: must be auto or a whole number of processes from 1 to 256, "
            "not '0'") in result.stderr


def test_workers_of_a_coordinated_member_need_the_cluster_secret(tmp_path: Path) -> None:
    """Every worker is a member: a secret the supervisor would make up would differ from
    the other hosts' (and from an etcd the members share)."""
    result = _serve(tmp_path, "--workers", "2", "--coordinator", "etcd://127.0.0.1:1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--cluster-secret (SQUALL_CLUSTER_SECRET) is required with --coordinator" in \
        result.stderr


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "gateway.commands.cli", "serve", "--workers", "2", "--data-dir",
             str(tmp_path / "data"), "--listen", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_worker_that_cannot_start_stops_the_gateway(tmp_path: Path) -> None:
    result = _serve(tmp_path, "--workers", "2", "--cache-mode", "elastic", "--cache-size", "0")
    assert result.returncode == 2
    assert "squall: cache_mode = elastic needs --cache-size > 0" in result.stderr
    assert "Traceback" not in result.stderr


def test_change_of_worker_count(tmp_path: Path) -> None:
    """Unflushed data under N workers: another N is refused until it is synced; a
    request in flight at SIGTERM completes."""
    server = start(tmp_path, *SLOW_BACKEND)
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="layout")
    bodies = {f"k{i}": os.urandom(1000 + i) for i in range(20)}
    for key, body in bodies.items():
        s3.put_object(Bucket="layout", Key=key, Body=body)
    big = os.urandom(24 * 2**20)
    s3.put_object(Bucket="layout", Key="big", Body=big)
    with httpx.stream("GET", f"{server.endpoint}/layout/big",
                      headers=_signed(server.endpoint, "/layout/big")) as response:
        assert response.status_code == 200
        chunks = response.iter_bytes(1 << 16)
        first = next(chunks)
        stopper = threading.Thread(target=server.stop)
        stopper.start()  # SIGTERM while the answer is in flight
        time.sleep(0.5)
        got = first + b"".join(chunks)
        stopper.join()
    assert hashlib.md5(got).digest() == hashlib.md5(big).digest()
    assert server.proc is not None and server.proc.returncode == 0, server.log()

    refused = _serve(tmp_path, "--workers", "1")
    assert refused.returncode == 2
    assert "was last served with --workers 2" in refused.stderr
    assert "run `squall sync`" in refused.stderr
    refused = _serve(tmp_path, "--workers", "3")
    assert refused.returncode == 2 and "--workers 2" in refused.stderr
    auto = SquallProcess(tmp_path / "data", ["--workers", "auto", *SLOW_BACKEND]).start()
    try:  # auto keeps the count whose caches hold the writes instead of refusing
        assert len(workers_status(auto)) == 2
        assert "--workers auto keeps 2 workers" in auto.log()
        s3 = make_client(auto.endpoint)
        for key, body in bodies.items():
            assert s3.get_object(Bucket="layout", Key=key)["Body"].read() == body
    finally:
        assert auto.stop() == 0, auto.log()

    server = start(tmp_path)  # N = 2 again, no throttle: flush, then change
    sync = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "sync", "--endpoint",
                           server.endpoint], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, "SQUALL_ACCESS_KEY": ACCESS_KEY,
                                            "SQUALL_SECRET_KEY": SECRET_KEY})
    assert sync.returncode == 0, sync.stderr
    assert server.stop() == 0
    single = SquallProcess(tmp_path / "data", ["--workers", "1"]).start()
    try:
        s3 = make_client(single.endpoint)
        for key, body in bodies.items():
            assert s3.get_object(Bucket="layout", Key=key)["Body"].read() == body
        assert not (tmp_path / "data" / "worker-0").exists()
        assert not (tmp_path / "data" / "workers.json").exists()
    finally:
        assert single.stop() == 0


def _signed(endpoint: str, path: str) -> dict[str, str]:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method="GET", url=endpoint + path)
    request.headers["x-amz-content-sha256"] = hashlib.sha256(b"").hexdigest()
    S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1").add_auth(request)
    return dict(request.headers.items())
