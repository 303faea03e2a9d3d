"""A posix backend whose file system turns read-only under a gateway with a cache tier
(a real tmpfs remounted ``ro``, as a failing disk or NFS server makes it): writes are
still absorbed by the cache, health says degraded with the reason once flushes have
failed for a while, and once the file system is writable again everything flushes."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.cache.flush_health import FAILING_AFTER_S
from tests.conftest import make_client
from tests.support.server import SquallProcess, run_sync
from tests.support.tmpfs import small_filesystem


@pytest.fixture
def backend_disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path / "backend", "64m") as mount:
        yield mount


def remount(mount: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mount)], check=True)


def health(server: SquallProcess) -> httpx.Response:
    return httpx.get(f"{server.endpoint}/_squall/health", timeout=10)


def test_a_read_only_backend_degrades_health_and_flushes_once_writable(
        tmp_path: Path, backend_disk: Path) -> None:
    server = SquallProcess(tmp_path / "data", ["--cache-size", "16MiB",
                                               "--backend", f"posix:{backend_disk}"]).start()
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="rofs")
        s3.put_object(Bucket="rofs", Key="before", Body=b"b" * 1000)
        assert run_sync(server).returncode == 0
        remount(backend_disk, "ro")
        kept = {f"k{i}": bytes([i]) * (64 * 1024) for i in range(8)}
        for key, body in kept.items():
            s3.put_object(Bucket="rofs", Key=key, Body=body)  # absorbed by the cache

        deadline = time.monotonic() + FAILING_AFTER_S + 60
        while (answer := health(server)).status_code == 200:
            assert time.monotonic() < deadline, "health never degraded"
            time.sleep(0.5)
        assert answer.status_code == 503
        reason = answer.json()["reason"]
        assert answer.json()["status"] == "degraded"
        assert reason.startswith("flushes to the backend failing for "), reason
        assert "EROFS" in reason and str(backend_disk) not in reason, reason
        assert not (backend_disk / "rofs" / "k0").exists()

        remount(backend_disk, "rw")
        synced = run_sync(server)
        assert synced.returncode == 0, synced.stdout + synced.stderr
        assert health(server).status_code == 200
        for key, body in kept.items():
            assert (backend_disk / "rofs" / key).read_bytes() == body
    finally:
        server.stop()
