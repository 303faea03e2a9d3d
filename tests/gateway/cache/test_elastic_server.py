"""`squall serve --cache-mode elastic` end to end: a burst attaches a volume, it drains
and detaches; a SIGKILL while it is attached loses nothing; bad settings are refused."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import make_client
from tests.support.server import SquallProcess

MB = 1_000_000
# One process: the volume sizes and paths below are one cache tier's (each worker sizes
# its own volumes from its share of the budget, docs/workers.md).
ELASTIC = ["--cache-mode", "elastic", "--cache-size", "32MiB", "--backend-bandwidth",
           "4MB/s", "--cache-volume-bandwidth", "50MB/s", "--inactivity-delay", "0.5",
           "--cost-backend-size-gb", "1", "--workers", "1"]


def status(server: SquallProcess) -> dict[str, Any]:
    return httpx.get(f"{server.endpoint}/_squall/status").json()


def wait_detached(server: SquallProcess, limit_s: float = 120.0) -> dict[str, Any]:
    """Poll until no volume is attached and nothing is dirty (a guard, not a timing)."""
    deadline = time.monotonic() + limit_s
    while True:
        s = status(server)
        if not s["cache_volumes"] and not s["dirty_bytes"] and s["elastic"]["state"] == "idle":
            return s
        assert time.monotonic() < deadline, f"never detached: {s['elastic']}"
        time.sleep(0.1)


def burst(s3: Any, bucket: str, objects: dict[str, bytes]) -> None:
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda kv: s3.put_object(Bucket=bucket, Key=kv[0], Body=kv[1]),
                      objects.items()))


def test_burst_attaches_then_detaches_and_everything_is_flushed(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = SquallProcess(data_dir, ELASTIC).start()
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="ckpt")
        before = status(server)
        assert before["cache_mode"] == "elastic" and before["cache_volumes"] == []
        assert before["elastic"]["state"] == "idle" and before["cache_capacity_bytes"] == 0
        objects = {f"rank-{i}/ckpt": os.urandom(MB + i) for i in range(4)}
        burst(s3, "ckpt", objects)
        during = status(server)
        (vol,) = during["cache_volumes"]  # attached for the burst
        assert vol["size_bytes"] == 32 << 20 and vol["bandwidth_bytes_per_s"] == 50 * MB
        assert vol["attached_since"] <= time.time()

        after = wait_detached(server)
        assert not any((data_dir / "volumes").iterdir())
        (record,) = after["elastic"]["bursts"]
        assert record["used_peak_bytes"] >= sum(map(len, objects.values()))
        assert after["elastic"]["next_size_bytes"] < 32 << 20  # shrunk to what was used
        for key, body in objects.items():
            assert s3.get_object(Bucket="ckpt", Key=key)["Body"].read() == body
            assert (data_dir / "objects" / "ckpt" / key).read_bytes() == body  # flushed
        cost = after["cost"]
        assert after["cost_agbs"] > 0 and cost["cache_gb_seconds"] > 0
        assert cost["cache_bandwidth_mb_s"] == 50.0  # B_c defaults to the volume cap
        metrics = httpx.get(f"{server.endpoint}/_squall/metrics").text
        assert "squall_cache_elastic_attaches_total 1.0" in metrics
        assert "squall_cache_volumes_attached 0.0" in metrics
        assert 'squall_cache_elastic_state{state="idle"} 1.0' in metrics
    finally:
        server.stop()


def test_sigkill_with_a_volume_attached_loses_no_acknowledged_write(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    slow = [*ELASTIC, "--backend-bandwidth", "256KiB/s", "--inactivity-delay", "3600"]
    server = SquallProcess(data_dir, slow).start()
    s3 = make_client(server.endpoint)
    s3.create_bucket(Bucket="ckpt")
    objects = {f"k{i}": os.urandom(MB) for i in range(3)}
    burst(s3, "ckpt", objects)
    assert status(server)["dirty_bytes"] > 0 and status(server)["cache_volumes"]
    server.kill()

    server = SquallProcess(data_dir, [*ELASTIC, "--inactivity-delay", "0.2"]).start()
    try:
        s3 = make_client(server.endpoint)
        recovered = status(server)
        assert [v["state"] for v in recovered["cache_volumes"]] == ["retiring"]
        for key, body in objects.items():
            assert s3.get_object(Bucket="ckpt", Key=key)["Body"].read() == body
        wait_detached(server)
        for key, body in objects.items():
            assert (data_dir / "objects" / "ckpt" / key).read_bytes() == body
    finally:
        server.stop()


def test_elastic_mode_refuses_bad_settings(tmp_path: Path) -> None:
    for args, message in (
            (["--cache-mode", "elastic", "--cache-size", "0"],
             "needs --cache-size > 0"),
            (["--cache-mode", "elastic", "--cache-volume-bandwidth", "fast"],
             "--cache-volume-bandwidth: expected a rate such as 20MiB/s"),
            (["--cache-mode", "sometimes"], "invalid choice")):
        done = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "serve", "--data-dir",
                               str(tmp_path / "d"), "--listen", "127.0.0.1:0", *args],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr
