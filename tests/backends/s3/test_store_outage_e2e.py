"""The whole store unreachable for a while, for real: a gateway with a small cache tier
(32 MiB) in front of a real MinIO that is SIGKILLed and, after the outage, started again
on the same port and data directory (connections refused), or SIGSTOPped and then
continued (connections accepted, nothing answered: a hung server, a black-holed link).

Meanwhile Squall keeps absorbing writes until its cache is full, then answers 503
SlowDown with Retry-After; its health says degraded with a reason that names neither
the store's address nor its bucket nor any credential. Once the store is back, health
recovers, ``squall sync`` flushes everything, and every acknowledged object reads back
byte-identical from MinIO itself (boto3). The outage lasts ``SQUALL_TEST_OUTAGE_S``
seconds (15 by default). Skipped where MinIO is not installed.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from loadtests.bench.server import ServerProcess
from loadtests.minio.install import missing_reason
from loadtests.minio.single import single_node
from tests.backends.s3.conftest import boto3_client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, run_sync

pytestmark = pytest.mark.timeout(300)

CACHE = 32 * 1024 * 1024
OBJECT = 1024 * 1024
#: seconds the store stays down: short in the suite; ``SQUALL_TEST_OUTAGE_S=60`` for the
#: full minute
OUTAGE_S = float(os.environ.get("SQUALL_TEST_OUTAGE_S", "15"))
T = TypeVar("T")


def until(check: Callable[[], T | None], what: str, timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (value := check()) is not None:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def client(endpoint: str) -> Any:
    """boto3 that sends each request once: every 503 is seen as it was answered."""
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                        config=Config(retries={"total_max_attempts": 1}, read_timeout=120,
                                      s3={"addressing_style": "path"}))


def health(gateway: SquallProcess) -> httpx.Response:
    return httpx.get(f"{gateway.endpoint}/_squall/health", timeout=10)


@pytest.fixture
def minio(tmp_path: Path) -> Iterator[ServerProcess]:
    """A MinIO of this test's own (it is killed and started again)."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    server = single_node(tmp_path / "minio", ACCESS_KEY, SECRET_KEY).start()
    yield server
    thaw(server)  # a stopped process would not take SIGTERM
    server.stop()


def kill(server: ServerProcess) -> None:
    """SIGKILL by PID, as a crash would: connections are refused."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGKILL)
    server.stop()  # reaps it


def freeze(server: ServerProcess) -> None:
    """SIGSTOP by PID, as a hung server or a black-holed link: connections are accepted
    (by the kernel) and nothing is answered."""
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)


def thaw(server: ServerProcess) -> None:
    if server.pid is not None:
        os.kill(server.pid, signal.SIGCONT)


#: how the store goes, and how it comes back: killed and started again on the same port
#: and data directory, or stopped and continued
FAULTS: dict[str, tuple[Callable[[ServerProcess], None], Callable[[ServerProcess], Any]]] = {
    "killed": (kill, ServerProcess.start), "hung": (freeze, thaw)}


def write_until_slowdown(s3: Any, acked: dict[str, str]) -> ClientError:
    """PUT 1 MiB objects until the gateway answers SlowDown; acknowledged ones go into
    ``acked`` (key -> MD5). Returns the SlowDown error."""
    refused = 0
    for i in range(4 * CACHE // OBJECT):
        key = f"rank{i % 4}/during{i:03d}"
        body = random.Random(i).randbytes(OBJECT)
        try:
            s3.put_object(Bucket="ckpt", Key=key, Body=body)
        except ClientError as exc:
            code = exc.response["Error"]["Code"]
            assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 503, exc.response
            if code == "SlowDown":
                return exc
            # A write the admission rule sent past the cache at the moment the store
            # went: refused (not acknowledged); the next ones go to the cache.
            assert code == "ServiceUnavailable" and refused < 3, exc.response
            refused += 1
            continue
        acked[key] = hashlib.md5(body).hexdigest()
    raise AssertionError(f"no SlowDown after {len(acked)} acknowledged writes")


#: The hung store's run sometimes takes minutes in the full suite (once 295 s against
#: 63 s alone): opt in with SQUALL_TEST_HUNG_STORE=1. tests/gateway/service/test_backend_watch.py
#: covers the probe's deadline against a real server that never answers.
HUNG = pytest.mark.skipif(not os.environ.get("SQUALL_TEST_HUNG_STORE"),
                          reason="the hung-store run is opt-in: SQUALL_TEST_HUNG_STORE=1")


@pytest.mark.parametrize("fault", [pytest.param(name, marks=HUNG) if name == "hung"
                                   else name for name in FAULTS])
def test_store_down_absorbs_then_slows_down_then_flushes_everything(
        minio: ServerProcess, tmp_path: Path, fault: str) -> None:
    """``read_timeout`` is short: a request in flight to a hung store fails after it."""
    cut, restore = FAULTS[fault]
    shared = f"squall-store-{uuid.uuid4().hex[:8]}"
    boto3_client(minio.endpoint).create_bucket(Bucket=shared)
    gateway = SquallProcess(tmp_path / "gateway", [
        "--cache-size", f"{CACHE}", "--backend-probe-interval", "0.5",
        "--backend", f"s3:{minio.endpoint}?bucket={shared}&read_timeout=5"],
        env={"SQUALL_UPSTREAM_ACCESS_KEY": ACCESS_KEY,
             "SQUALL_UPSTREAM_SECRET_KEY": SECRET_KEY}).start()
    try:
        s3 = client(gateway.endpoint)
        s3.create_bucket(Bucket="ckpt")
        acked: dict[str, str] = {}
        for i in range(4):  # a checkpoint under way when the store goes
            body = random.Random(-i).randbytes(OBJECT)
            s3.put_object(Bucket="ckpt", Key=f"rank{i}/before", Body=body)
            acked[f"rank{i}/before"] = hashlib.md5(body).hexdigest()

        cut(minio)
        down = time.monotonic()
        slowdown = write_until_slowdown(s3, acked)
        retry_after = slowdown.response["ResponseMetadata"]["HTTPHeaders"]["retry-after"]
        assert int(retry_after) >= 1
        absorbed = len(acked) - 4
        assert absorbed * OBJECT >= CACHE // 2, f"only {absorbed} writes absorbed"

        degraded = until(lambda: r if (r := health(gateway)).status_code == 503 else None,
                         "health to degrade")
        body = degraded.json()
        assert body["status"] == "degraded", body
        reason = body["reason"]
        assert reason.startswith("backend unreachable: "), reason
        port = minio.endpoint.rsplit(":", 1)[1]
        for secret in ("127.0.0.1", port, shared, ACCESS_KEY, SECRET_KEY, "http"):
            assert secret not in reason, reason
        status = httpx.get(f"{gateway.endpoint}/_squall/status", timeout=10).json()
        assert status["backend"]["reachable"] is False
        assert status["dirty_bytes"] >= absorbed * OBJECT
        # What the cache holds is served while the store is down.
        read = s3.get_object(Bucket="ckpt", Key="rank1/during001")["Body"].read()
        assert hashlib.md5(read).hexdigest() == acked["rank1/during001"]

        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down)))
        assert health(gateway).status_code == 503  # still down after the whole outage
        restore(minio)  # the same process, or a new one on the same port and data
        until(lambda: True if health(gateway).status_code == 200 else None,
              "health to recover", timeout_s=120)
        synced = run_sync(gateway, timeout=240)
        assert synced.returncode == 0, synced.stdout + synced.stderr
        assert gateway.counter("dirty_objects") == 0

        store = boto3_client(minio.endpoint)
        for key, md5 in acked.items():
            stored = store.get_object(Bucket=shared, Key=f"ckpt/{key}")["Body"].read()
            assert hashlib.md5(stored).hexdigest() == md5, key
        s3.put_object(Bucket="ckpt", Key="after", Body=b"back")  # writes go on as before
    finally:
        gateway.stop()
