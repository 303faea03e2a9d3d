"""One gateway per data directory: a second ``squall serve`` on a directory in use says so
in one line and exits 2, leaving the first gateway and its data alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import make_client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port


def test_a_second_gateway_on_a_data_directory_in_use(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = SquallProcess(data).start()
    try:
        s3 = make_client(first.endpoint)
        s3.create_bucket(Bucket="kept")
        s3.put_object(Bucket="kept", Key="k", Body=b"v")
        for workers in ("1", "2"):  # a different worker count must not touch its index
            second = subprocess.run(
                [sys.executable, "-m", "gateway.commands.cli", "serve", "--data-dir",
                 str(data), "--listen", f"127.0.0.1:{free_port()}", "--workers", workers],
                capture_output=True, text=True, timeout=120, check=False,
                env={**os.environ, "SQUALL_ACCESS_KEY": ACCESS_KEY,
                     "SQUALL_SECRET_KEY": SECRET_KEY})
            assert second.returncode == 2, second
            pid = first.proc.pid if first.proc else 0
            assert second.stderr.splitlines() == [
                (f"squall: data directory {data} is in use by another gateway (pid {pid}): "
                 "stop it, or give this one its own --data-dir")], second.stderr
            assert second.stdout == ""
        assert httpx.get(f"{first.endpoint}/_squall/health").status_code == 200
        assert s3.get_object(Bucket="kept", Key="k")["Body"].read() == b"v"
    finally:
        assert first.stop() == 0
    first.kill()
    again = SquallProcess(data).start()  # the lock ends with its holder
    try:
        assert make_client(again.endpoint).get_object(Bucket="kept", Key="k")["Body"].read() \
            == b"v"
    finally:
        assert again.stop() == 0
