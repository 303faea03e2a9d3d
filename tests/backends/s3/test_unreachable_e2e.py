"""An s3: backend whose upstream goes away (connection refused) and comes back: 503
ServiceUnavailable, health degraded, the reason in the status and logged once."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


def until(check, what: str, timeout_s: float = 15.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (value := check()):
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_unreachable_upstream_is_reported_and_recovers(tmp_path: Path) -> None:
    upstream = SquallProcess(tmp_path / "upstream", ["--cache-size", "0"]).start()
    url = f"http://127.0.0.1:{upstream.port}?retries=1&connect_timeout=1"
    gateway = SquallProcess(tmp_path / "gateway", [
        "--cache-size", "0", "--backend", f"s3:{url}", "--backend-probe-interval", "0.2"],
        env={"SQUALL_UPSTREAM_ACCESS_KEY": ACCESS_KEY,
             "SQUALL_UPSTREAM_SECRET_KEY": SECRET_KEY})
    try:
        gateway.start()
        s3 = make_client(gateway.endpoint)
        s3.create_bucket(Bucket="far")
        s3.put_object(Bucket="far", Key="k", Body=b"kept")
        upstream.stop()

        health = until(lambda: (r := httpx.get(f"{gateway.endpoint}/_squall/health"))
                       .status_code == 503 and r, "health to degrade")
        assert health.json()["status"] == "degraded"
        assert "unreachable" in health.json()["reason"]
        backend = httpx.get(f"{gateway.endpoint}/_squall/status").json()["backend"]
        assert backend["reachable"] is False and "cannot be reached" in backend["reason"]
        for call in (lambda: s3.put_object(Bucket="far", Key="k2", Body=b"x"),
                     lambda: s3.get_object(Bucket="far", Key="k")):
            try:
                call()
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "ServiceUnavailable"
                assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 503
            else:
                raise AssertionError("a request reached a stopped upstream")
        time.sleep(0.5)  # a few more probes: still one log line (per worker)
        assert gateway.log().count("backend unreachable") == gateway.workers

        upstream = SquallProcess(tmp_path / "upstream", ["--cache-size", "0"],
                                 port=upstream.port).start()
        until(lambda: httpx.get(f"{gateway.endpoint}/_squall/health").status_code == 200,
              "health to recover")
        assert httpx.get(f"{gateway.endpoint}/_squall/status").json()["backend"]["reachable"]
        assert s3.get_object(Bucket="far", Key="k")["Body"].read() == b"kept"
        assert "backend reachable again" in gateway.log()
    finally:
        gateway.stop()
        upstream.stop()
