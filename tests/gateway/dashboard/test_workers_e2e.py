"""The dashboard of ``squall serve --workers 2``: one page, the whole gateway's figures."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import make_client
from tests.gateway.dashboard.test_top_e2e import top
from tests.support.server import SquallProcess

# A backend of 2 bytes/s: written data stays dirty in its owner's cache.
GATEWAY = ["--workers", "2", "--backend-bandwidth", "2B/s", "--inactivity-delay", "3600",
           "--cache-admission", "cache"]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    server = SquallProcess(tmp_path_factory.mktemp("dashboard-workers") / "data",
                           GATEWAY).start()
    yield server
    server.kill()


def test_data_is_every_workers_merged(gateway: SquallProcess, tmp_path: Path) -> None:
    assert httpx.get(f"{gateway.endpoint}/_squall/ui").status_code == 200
    s3 = make_client(gateway.endpoint)
    s3.create_bucket(Bucket="burst")
    for i in range(16):  # the ring spreads the keys over both workers
        s3.put_object(Bucket="burst", Key=f"k-{i}", Body=b"y" * 10_000)
    deadline = time.monotonic() + 20
    while True:  # the phase follows the writeback controller's next tick
        doc = httpx.get(f"{gateway.endpoint}/_squall/ui/data", timeout=10).json()
        if doc["cache"]["phase"] == "phase1" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert doc["workers"] == 2
    members = doc["members"]
    assert [m["name"] for m in members] == ["worker-0", "worker-1"]
    assert [m["health"] for m in members] == ["up", "up"]
    assert sum(m["self"] for m in members) == 1
    assert all(m["key_share"] == 0.5 for m in members)
    assert all(m["dirty_bytes"] > 0 for m in members)  # both own some of the keys
    # 16 objects of 10,000 bytes, and the bucket's access settings (a small document).
    assert doc["cache"]["dirty_bytes"] == sum(m["dirty_bytes"] for m in members)
    assert 160_000 < doc["cache"]["dirty_bytes"] < 161_000
    assert doc["cache"]["dirty_objects"] == 17 and doc["cache"]["phase"] == "phase1"
    assert {v["worker"] for v in doc["cache"]["volumes"]} == {0, 1}
    statuses = httpx.get(f"{gateway.endpoint}/_squall/status?workers=all",
                         timeout=10).json()["workers"]
    assert doc["cache"]["capacity_bytes"] == sum(s["cache_capacity_bytes"] for s in statuses)

    done = top("--endpoint", gateway.endpoint, "--once")
    assert done.returncode == 0, done.stderr
    assert "2 workers" in done.stdout and "worker-0" in done.stdout \
        and "worker-1" in done.stdout and "156.6 KiB in 17 objects" in done.stdout
