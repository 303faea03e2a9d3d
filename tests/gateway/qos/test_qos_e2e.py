"""G-states end to end: a real gateway, ``squall qos`` via the CLI, a boto3 burst, the
gear rising and falling in /_squall/status and the metrics, bills, and bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

CONFIG = """
[qos]
interval = 0.2
max_wait = 3.0

[qos.buckets.configured]
g0_bandwidth = "1MB/s"
max_gear = 2
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    root = tmp_path_factory.mktemp("qos")
    (root / "squall.toml").write_text(CONFIG)
    # One process: with --workers N each worker enforces 1/N of every cap and has a gear
    # of its own (docs/qos.md, "Several workers"), which the figures below do not model.
    server = SquallProcess(root / "data", ["--config", str(root / "squall.toml"),
                                           "--cache-admission", "cache",
                                           "--cost-backend-size-gb", "10",
                                           "--workers", "1"]).start()
    make_client(server.endpoint).create_bucket(Bucket="configured")
    yield server
    assert server.stop() == 0, server.log()


def cli(gateway: SquallProcess, *args: str,
        command_name: str = "qos") -> subprocess.CompletedProcess[str]:
    """``squall qos ARGS`` (or ``squall COMMAND_NAME ARGS``) against ``gateway``."""
    command = [sys.executable, "-m", "gateway.commands.cli", command_name, *args,
               "--endpoint", gateway.endpoint]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "SQUALL_ACCESS_KEY": ACCESS_KEY,
                               "SQUALL_SECRET_KEY": SECRET_KEY})


def qos_of(gateway: SquallProcess, bucket: str) -> dict[str, Any]:
    status = httpx.get(f"{gateway.endpoint}/_squall/status").json()
    return status.get("qos", {}).get("buckets", {}).get(bucket, {})


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def signed(gateway: SquallProcess, method: str, query: str,
           secret: str = SECRET_KEY) -> httpx.Response:
    url = f"{gateway.endpoint}/_squall/qos?{query}"
    request = AWSRequest(method=method, url=url, data=b"")
    request.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    S3SigV4Auth(Credentials(ACCESS_KEY, secret), "s3", "us-east-1").add_auth(request)
    return httpx.request(method, url, headers=dict(request.headers.items()))


def test_burst_promotes_then_the_gear_falls(gateway: SquallProcess) -> None:
    s3 = make_client(gateway.endpoint)
    bucket = f"burst-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    result = cli(gateway, "set", bucket, "--g0-bandwidth", "256KB/s", "--max-gear", "3",
                 "--demote-after", "2")
    assert result.returncode == 0, result.stderr
    assert bucket in result.stdout and "0/3" in result.stdout
    stop = threading.Event()
    written: list[str] = []

    def burst(writer: int) -> None:
        client = make_client(gateway.endpoint)
        n = 0
        while not stop.is_set():
            key = f"w{writer}/{n}"
            client.put_object(Bucket=bucket, Key=key, Body=os.urandom(64 * 1024))
            written.append(key)
            n += 1

    threads = [threading.Thread(target=burst, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: qos_of(gateway, bucket).get("gear") == 3, 20,
                 "gear 3 during the burst")
        metrics = httpx.get(f"{gateway.endpoint}/_squall/metrics").text
        assert f'squall_qos_gear{{bucket="{bucket}"}} 3.0' in metrics
        assert f'squall_qos_gear_seconds_total{{bucket="{bucket}"}}' in metrics
        wait_for(lambda: qos_of(gateway, bucket)["bandwidth_used"] > 0.5 * 2048e3, 5,
                 "use near the top cap")
    finally:
        stop.set()
        for t in threads:
            t.join()
    q = qos_of(gateway, bucket)
    assert q["bandwidth_cap"] == 256e3 * 8 and q["max_gear"] == 3
    wait_for(lambda: qos_of(gateway, bucket)["gear"] == 0, 20, "gear 0 after the burst")
    q = qos_of(gateway, bucket)
    assert q["gear_seconds"] > sum(q["seconds_at_gear"])  # time at higher gears counts more
    # Nothing was lost while the class was paced.
    for key in written[:: max(1, len(written) // 10)]:
        assert len(s3.get_object(Bucket=bucket, Key=key)["Body"].read()) == 64 * 1024
    cost = cli(gateway, command_name="cost")
    assert cost.returncode == 0, cost.stderr
    assert "QoS gears" in cost.stdout and bucket in cost.stdout
    status = httpx.get(f"{gateway.endpoint}/_squall/status").json()
    assert status["cost"]["qos_buckets_agbs"][bucket] > 0  # G0 MB/s x N GB per gear-s


def test_a_wait_beyond_the_bound_is_slowdown_and_stores_nothing(
        gateway: SquallProcess) -> None:
    s3 = make_client(gateway.endpoint)
    bucket = f"slow-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    assert cli(gateway, "set", bucket, "--g0-bandwidth", "100KB/s",
               "--max-gear", "0").returncode == 0
    started = time.monotonic()
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=bucket, Key="big", Body=b"x" * 1_000_000)  # 10 s > 3 s bound
    assert time.monotonic() - started < 2.5
    error = refused.value.response
    assert error["Error"]["Code"] == "SlowDown"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert int(error["ResponseMetadata"]["HTTPHeaders"]["retry-after"]) >= 1
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="big")
    s3.put_object(Bucket=bucket, Key="small", Body=b"y" * 100_000)  # 1 s: waits, passes
    assert qos_of(gateway, bucket)["refused"] >= 1


def test_show_and_clear(gateway: SquallProcess) -> None:
    shown = cli(gateway, "show")
    assert shown.returncode == 0 and "configured" in shown.stdout
    assert '"max_gear": 2' in cli(gateway, "show", "configured", "--json").stdout
    assert cli(gateway, "clear", "configured").returncode == 0
    assert "configured" not in cli(gateway, "show").stdout
    assert qos_of(gateway, "configured") == {}
    assert cli(gateway, "clear", "configured").returncode == 0  # as S3: idempotent


def test_bad_inputs(gateway: SquallProcess) -> None:
    missing = cli(gateway, "set", "no-such-bucket-qos", "--g0-bandwidth", "1MB/s")
    assert missing.returncode == 1
    assert "NoSuchBucket" in missing.stderr
    bad_rate = cli(gateway, "set", "configured", "--g0-bandwidth", "fast")
    assert bad_rate.returncode == 2
    assert bad_rate.stderr.startswith("squall qos: --g0-bandwidth:")
    assert "expected a rate such as 20MiB/s, 1.5GB/s or 100000, got 'fast'" in bad_rate.stderr
    assert len(bad_rate.stderr.splitlines()) == 1
    bad_gear = cli(gateway, "set", "configured", "--g0-bandwidth", "1MB/s", "--max-gear", "99")
    assert bad_gear.returncode == 2 and "--max-gear:" in bad_gear.stderr
    response = signed(gateway, "PUT", "bucket=configured&g0_bandwidth=-5")
    assert response.status_code == 400
    assert response.json()["error"] == "InvalidArgument"
    response = signed(gateway, "PUT", "bucket=configured&g0_bandwidth=1MB&colour=red")
    assert response.status_code == 400 and "colour" in response.json()["message"]
    response = signed(gateway, "PUT", "g0_bandwidth=1MB")
    assert response.status_code == 400
    response = signed(gateway, "PUT", "bucket=nope-qos&g0_bandwidth=1MB")
    assert (response.status_code, response.json()["error"]) == (404, "NoSuchBucket")
    response = signed(gateway, "PUT", "bucket=configured&g0_bandwidth=1MB", secret="wrong")
    assert response.status_code == 403
    assert httpx.delete(f"{gateway.endpoint}/_squall/qos?bucket=configured").status_code == 403


def test_unconfigured_buckets_are_not_paced(gateway: SquallProcess, tmp_path: Path) -> None:
    s3 = make_client(gateway.endpoint)
    bucket = f"free-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    started = time.monotonic()
    s3.put_object(Bucket=bucket, Key="big", Body=b"z" * 2_000_000)
    assert time.monotonic() - started < 2.0
    assert qos_of(gateway, bucket) == {}


def test_a_user_class_paces_that_user_in_every_bucket(gateway: SquallProcess) -> None:
    added = cli(gateway, "add", "quota-user", "--json", command_name="user")
    assert added.returncode == 0, added.stderr
    keys = json.loads(added.stdout)
    limited = boto3.client("s3", endpoint_url=gateway.endpoint, region_name="us-east-1",
                           aws_access_key_id=keys["access_key"],
                           aws_secret_access_key=keys["secret_key"],
                           config=Config(retries={"max_attempts": 1}))
    bucket = f"shared-{uuid.uuid4().hex[:8]}"
    limited.create_bucket(Bucket=bucket)  # its own: the admin writes everywhere
    assert cli(gateway, "set", "--user", "quota-user", "--g0-bandwidth", "100KB/s",
               "--max-gear", "0").returncode == 0
    shown = cli(gateway, "show", "--user", "quota-user", "--json")
    assert json.loads(shown.stdout)["users"]["quota-user"]["bandwidth_cap"] == 100_000
    assert "user quota-user" in cli(gateway, "show").stdout
    s3 = make_client(gateway.endpoint)
    with pytest.raises(ClientError) as refused:  # 10 s at 100 KB/s > the 3 s bound
        limited.put_object(Bucket=bucket, Key="big", Body=b"x" * 1_000_000)
    assert refused.value.response["Error"]["Code"] == "SlowDown"
    started = time.monotonic()
    s3.put_object(Bucket=bucket, Key="big", Body=b"x" * 1_000_000)  # the admin: no class
    assert time.monotonic() - started < 2.0
    status = httpx.get(f"{gateway.endpoint}/_squall/status").json()
    assert status["qos"]["users"]["quota-user"]["refused"] >= 1
    assert bucket not in status["qos"]["buckets"]
    metrics = httpx.get(f"{gateway.endpoint}/_squall/metrics").text
    assert 'squall_qos_user_gear{user="quota-user"} 0.0' in metrics
    assert cli(gateway, "clear", "--user", "quota-user").returncode == 0
    limited.put_object(Bucket=bucket, Key="big", Body=b"x" * 1_000_000)


def test_bad_user_class_inputs(gateway: SquallProcess) -> None:
    missing = cli(gateway, "set", "--user", "nobody-here", "--g0-bandwidth", "1MB/s")
    assert missing.returncode == 1 and "NoSuchUser" in missing.stderr
    both = cli(gateway, "set", "configured", "--user", "x", "--g0-bandwidth", "1MB/s")
    assert both.returncode == 2 and "not both" in both.stderr
    neither = cli(gateway, "clear")
    assert neither.returncode == 2 and "--user" in neither.stderr
    response = signed(gateway, "PUT", "bucket=configured&user=x&g0_bandwidth=1MB")
    assert response.status_code == 400
    assert response.json()["error"] == "InvalidArgument"
