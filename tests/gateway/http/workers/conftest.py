"""Real ``squall serve --workers 2`` gateways on loopback ports, real boto3 clients."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway.cluster.ring import owner_index
from gateway.http.workers.host import single_host
from tests.conftest import make_client
from tests.support.server import SquallProcess

WORKERS = 2
MEMBERS = [single_host(k) for k in range(WORKERS)]
# The backend takes one byte per second: writes stay unflushed in their owner's cache,
# so reads and listings prove the workers, not the backend.
SLOW_BACKEND = ("--backend-bandwidth", "2B/s", "--inactivity-delay", "3600",
                "--cache-admission", "cache")
CLIENTS = 4  # each its own connection pool: the kernel spreads them over the workers


def owner(bucket: str, key: str) -> int:
    return owner_index(MEMBERS, bucket, key)


def keys_of(worker: int, bucket: str, count: int, prefix: str = "k") -> list[str]:
    return [k for k in (f"{prefix}-{i}" for i in range(10 * count + 100))
            if owner(bucket, k) == worker][:count]


def workers_status(server: SquallProcess) -> list[dict[str, Any]]:
    status = httpx.get(f"{server.endpoint}/_squall/status?workers=all", timeout=10).json()
    return status["workers"]  # type: ignore[no-any-return]


def wait_healthy(server: SquallProcess, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{server.endpoint}/_squall/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.1)


def start(root: Any, *args: str) -> SquallProcess:
    return SquallProcess(root / "data", ["--workers", str(WORKERS), "--min-part-size", "1024",
                                         *args]).start()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    server = start(tmp_path_factory.mktemp("workers"), *SLOW_BACKEND)
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def clients(gateway: SquallProcess) -> list[Any]:
    return [make_client(gateway.endpoint) for _ in range(CLIENTS)]


@pytest.fixture
def wbucket(clients: list[Any]) -> str:
    name = f"w-{uuid.uuid4().hex[:12]}"
    clients[0].create_bucket(Bucket=name)
    return name
