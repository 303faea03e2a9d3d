"""Fair shares on a real gateway: one user holding many slow uploads open takes no more
than the process can spare, while another user and the admin surface go on."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from gateway.client.signing import status_headers
from tests.gateway.auth.test_users_e2e import add_user, client
from tests.gateway.slow_clients import answer_within, slow_put
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

MAX_REQUESTS = 16
SHARE = 3
ATTACK = 20  # slow uploads opened by one user
SIGNED = {"SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY}
#: a generous bound for "normal latency" of a small request on a loaded test machine
PROMPT_S = 5.0


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    # The slow uploads must stay open for the whole test: a long grace before the
    # minimum rate applies (tests/gateway/test_slow_clients_e2e.py closes them).
    server = SquallProcess(tmp_path_factory.mktemp("shares") / "data", [
        "--workers", "1", "--max-requests", str(MAX_REQUESTS),
        "--user-max-requests", str(SHARE), "--body-rate-grace", "120",
        "--body-idle-timeout", "120"], public_status=False).start()
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def mallory(shared: SquallProcess) -> dict[str, Any]:
    return add_user(shared, "mallory")


@pytest.fixture(scope="module")
def bob(shared: SquallProcess) -> dict[str, Any]:
    return add_user(shared, "bob")


def status(server: SquallProcess) -> dict[str, Any]:
    url = f"{server.endpoint}/_squall/status"
    answer = httpx.get(url, headers=status_headers(url, environ=SIGNED), timeout=PROMPT_S)
    assert answer.status_code == 200, answer.text
    doc: dict[str, Any] = answer.json()
    return doc


def test_slow_uploads_of_one_user_leave_the_others_served(
        shared: SquallProcess, mallory: dict[str, Any], bob: dict[str, Any]) -> None:
    s3_mallory = client(shared.endpoint, mallory["access_key"], mallory["secret_key"])
    s3_bob = client(shared.endpoint, bob["access_key"], bob["secret_key"])
    s3_mallory.create_bucket(Bucket="mallory-bucket")
    s3_bob.create_bucket(Bucket="bob-bucket")
    refused_before = status(shared)["fair_shares"]["refused"]
    socks: list[socket.socket] = []
    try:
        # Each declares 10 MB and sends one byte (the probe's attack, scaled down).
        for i in range(ATTACK):
            socks.append(slow_put(shared, f"/mallory-bucket/slow-{i}", 10_000_000,
                                  access_key=mallory["access_key"],
                                  secret_key=mallory["secret_key"]))
        time.sleep(0.5)
        answers = [answer_within(sock, 0.2) for sock in socks]
        refused = [a for a in answers if a]
        # Past her share, mallory is admitted only while the process keeps a share free:
        # MAX_REQUESTS - SHARE uploads are held, the rest refused at once.
        assert len(refused) == ATTACK - (MAX_REQUESTS - SHARE), answers
        for answer in refused:
            assert answer.startswith(b"HTTP/1.1 503 "), answer
            assert b"<Code>SlowDown</Code>" in answer and b"retry-after: 1" in answer.lower()
        with pytest.raises(ClientError) as err:
            s3_mallory.list_objects_v2(Bucket="mallory-bucket")
        assert err.value.response["Error"]["Code"] == "SlowDown"
        # Bob's writes and reads, the health check and the admin's status go on.
        for i in range(5):
            started = time.monotonic()
            body = os.urandom(100_000 + i)
            s3_bob.put_object(Bucket="bob-bucket", Key=f"k{i}", Body=body)
            assert s3_bob.get_object(Bucket="bob-bucket", Key=f"k{i}")["Body"].read() == body
            assert time.monotonic() - started < PROMPT_S
            started = time.monotonic()
            health = httpx.get(f"{shared.endpoint}/_squall/health", timeout=PROMPT_S)
            assert health.status_code == 200 and time.monotonic() - started < PROMPT_S
        shares = status(shared)["fair_shares"]
        assert shares["in_flight"] >= MAX_REQUESTS - SHARE
        assert shares["refused"] >= refused_before + len(refused) + 1
        assert "mallory" not in json.dumps(shares)  # the status names no user
    finally:
        for sock in socks:
            sock.close()
    # Once her uploads are gone, mallory is served again.
    deadline = time.monotonic() + 10
    while status(shared)["fair_shares"]["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert s3_mallory.list_objects_v2(Bucket="mallory-bucket")["KeyCount"] == 0


def squall_user(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_", "AWS_"))},
           **SIGNED}
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", "user", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_users_own_rate_limit_set_with_squall_user(shared: SquallProcess,
                                                    bob: dict[str, Any]) -> None:
    s3_bob = client(shared.endpoint, bob["access_key"], bob["secret_key"])
    s3_bob.create_bucket(Bucket="bob-rated")
    limited = squall_user("limit", "bob", "--max-rate", "1", "--endpoint", shared.endpoint,
                          "--json")
    assert limited.returncode == 0, limited.stderr
    assert json.loads(limited.stdout)["limits"] == {"max_rate": 1.0}
    listed = squall_user("list", "--endpoint", shared.endpoint, "--json")
    rows = {u["name"]: u for u in json.loads(listed.stdout)["users"]}
    assert rows["bob"]["limits"] == {"max_rate": 1.0} and "limits" not in rows["mallory"]
    codes = []
    for _ in range(6):
        try:
            s3_bob.head_bucket(Bucket="bob-rated")
            codes.append(200)
        except ClientError as exc:
            codes.append(exc.response["ResponseMetadata"]["HTTPStatusCode"])
    assert 200 in codes and 503 in codes, codes
    # Another user is not slowed by bob's limit.
    s3_admin = client(shared.endpoint, ACCESS_KEY, SECRET_KEY)
    for _ in range(6):
        s3_admin.head_bucket(Bucket="bob-rated")
    cleared = squall_user("limit", "bob", "--endpoint", shared.endpoint)
    assert cleared.returncode == 0, cleared.stderr
    for _ in range(6):
        s3_bob.head_bucket(Bucket="bob-rated")


def test_bad_limits_are_refused_before_anything_is_sent(shared: SquallProcess) -> None:
    for args in (("--max-rate", "-1"), ("--max-bandwidth", "fast"),
                 ("--max-requests", "x")):
        result = squall_user("limit", "bob", *args, "--endpoint", shared.endpoint)
        assert result.returncode == 2, (args, result.stderr)
    missing = squall_user("limit", "nobody", "--max-rate", "1", "--endpoint", shared.endpoint)
    assert missing.returncode == 1 and "NoSuchEntity" in missing.stderr
