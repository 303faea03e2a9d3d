"""``squall sync`` against a real gateway whose backend refuses a flush for good."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import make_client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


def _sync(server: SquallProcess) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", "sync", "--endpoint",
                           server.endpoint], capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, "SQUALL_ACCESS_KEY": ACCESS_KEY,
                                            "SQUALL_SECRET_KEY": SECRET_KEY})


def test_sync_reports_a_quarantined_flush_and_exits_non_zero(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = SquallProcess(data, ["--cache-admission", "cache", "--backend-bandwidth",
                                  "1KiB/s"]).start()
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="lab")
        s3.put_object(Bucket="lab", Key="run-1/state.h5", Body=b"x" * 50_000)
        bucket_dir = data / "objects" / "lab"  # removed behind the gateway's back
        os.rename(bucket_dir, tmp_path / "lab.aside")
        bucket_dir.write_bytes(b"not a bucket")
        result = _sync(server)
        assert result.returncode == 1, result
        assert "Quarantined" in result.stderr and "lab/run-1/state.h5" in result.stderr
        assert "NoSuchBucket" in result.stderr
        # The object and the bucket's access settings (a document of its own) are held.
        status = httpx.get(f"{server.endpoint}/_squall/status").json()
        assert status["quarantined_objects"] == 2
        metrics = httpx.get(f"{server.endpoint}/_squall/metrics").text
        held = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                if line.startswith("squall_cache_quarantined_objects")]  # per worker, if any
        assert sum(held) == 2.0
    finally:
        server.stop()
    bucket_dir.unlink()
    os.rename(tmp_path / "lab.aside", bucket_dir)
    server = SquallProcess(data).start()  # kept in the cache across the restart
    try:
        assert _sync(server).returncode == 0  # repaired: the retry flushes it
        assert (bucket_dir / "run-1" / "state.h5").read_bytes() == b"x" * 50_000
        body = make_client(server.endpoint).get_object(Bucket="lab", Key="run-1/state.h5")
        assert body["Body"].read() == b"x" * 50_000
    finally:
        server.stop()
