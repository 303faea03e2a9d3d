"""Users on a real gateway: ``squall user`` through the signed admin API and on the data
directory, two users with boto3 and the aws CLI, removal, the admin-only API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from gateway.client.signing import status_headers
from tests.gateway.s3api.clients.helpers import make_aws
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


def squall_cli(*args: str, access_key: str = ACCESS_KEY,
               secret_key: str = SECRET_KEY) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_", "AWS_"))}
    env.update(SQUALL_ACCESS_KEY=access_key, SQUALL_SECRET_KEY=secret_key)
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", *args], capture_output=True,
                          text=True, timeout=60, check=False, env=env)


def client(endpoint: str, access_key: str, secret_key: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access_key,
                        aws_secret_access_key=secret_key, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))


def add_user(server: SquallProcess, name: str) -> dict[str, Any]:
    result = squall_cli("user", "add", name, "--endpoint", server.endpoint, "--json")
    assert result.returncode == 0, result.stderr
    user: dict[str, Any] = json.loads(result.stdout)
    return user


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    server = SquallProcess(tmp_path_factory.mktemp("users") / "data").start()
    yield server
    assert server.stop() == 0, server.log()


def test_user_add_json_prints_the_key_pair_and_a_canonical_id(gateway: SquallProcess) -> None:
    user = add_user(gateway, f"u{uuid.uuid4().hex[:8]}")
    assert user.keys() >= {"name", "access_key", "secret_key", "canonical_id"}
    assert len(user["canonical_id"]) == 64 and int(user["canonical_id"], 16) >= 0
    assert len(user["secret_key"]) >= 40
    listed = squall_cli("user", "list", "--endpoint", gateway.endpoint, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {u["name"]: u for u in json.loads(listed.stdout)["users"]}
    assert rows[user["name"]]["access_key"] == user["access_key"]
    assert rows["admin"]["admin"] is True and rows["admin"]["access_key"] == ACCESS_KEY
    assert user["secret_key"] not in listed.stdout and SECRET_KEY not in listed.stdout


def test_two_users_create_and_use_buckets_and_see_themselves_as_owner(
        gateway: SquallProcess, tmp_path: Path) -> None:
    alice, bob = add_user(gateway, "alice"), add_user(gateway, "bob")
    s3_alice = client(gateway.endpoint, alice["access_key"], alice["secret_key"])
    s3_alice.create_bucket(Bucket="alice-bucket")
    s3_alice.put_object(Bucket="alice-bucket", Key="k", Body=b"from alice")
    assert s3_alice.get_object(Bucket="alice-bucket", Key="k")["Body"].read() == b"from alice"
    owner = s3_alice.list_buckets()["Owner"]
    assert owner == {"ID": alice["canonical_id"], "DisplayName": "alice"}

    aws = make_aws(gateway.endpoint, tmp_path / "home", access_key=bob["access_key"],
                   secret_key=bob["secret_key"])
    aws("s3api", "create-bucket", "--bucket", "bob-bucket")
    (tmp_path / "f").write_bytes(b"from bob")
    aws("s3", "cp", str(tmp_path / "f"), "s3://bob-bucket/k")
    listed = json.loads(aws("s3api", "list-buckets").stdout)
    assert listed["Owner"]["ID"] == bob["canonical_id"]
    assert listed["Owner"]["DisplayName"] == "bob"
    got = aws("s3", "cp", "s3://bob-bucket/k", "-").stdout
    assert got == "from bob"


def test_a_removed_users_key_is_refused_at_once(gateway: SquallProcess) -> None:
    carol = add_user(gateway, "carol")
    s3 = client(gateway.endpoint, carol["access_key"], carol["secret_key"])
    s3.list_buckets()
    removed = squall_cli("user", "remove", "carol", "--endpoint", gateway.endpoint)
    assert removed.returncode == 0, removed.stderr
    with pytest.raises(ClientError) as info:
        s3.list_buckets()
    assert info.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    again = squall_cli("user", "remove", "carol", "--endpoint", gateway.endpoint)
    assert again.returncode == 1 and "no user 'carol'" in again.stderr


def test_only_the_admin_may_call_the_users_api(gateway: SquallProcess) -> None:
    dave = add_user(gateway, "dave")
    for args in (("list",), ("add", "eve"), ("remove", "dave")):
        result = squall_cli("user", *args, "--endpoint", gateway.endpoint,
                            access_key=dave["access_key"], secret_key=dave["secret_key"])
        assert result.returncode == 1
        assert "AccessDenied" in result.stderr, result.stderr
    url = f"{gateway.endpoint}/_squall/users"
    assert httpx.get(url, timeout=10).status_code == 403  # unsigned
    env = {"SQUALL_ACCESS_KEY": dave["access_key"], "SQUALL_SECRET_KEY": dave["secret_key"]}
    response = httpx.get(url, headers=status_headers(url, environ=env), timeout=10)
    assert response.status_code == 403 and response.json()["error"] == "AccessDenied"


def test_only_the_admin_may_change_the_gateways_settings(gateway: SquallProcess) -> None:
    heidi = add_user(gateway, "heidi")
    client(gateway.endpoint, heidi["access_key"], heidi["secret_key"]).create_bucket(
        Bucket="heidis")
    result = squall_cli("qos", "set", "heidis", "--g0-bandwidth", "1MB/s",
                        "--endpoint", gateway.endpoint,
                        access_key=heidi["access_key"], secret_key=heidi["secret_key"])
    assert result.returncode != 0 and "AccessDenied" in result.stderr, result.stderr
    env = {"SQUALL_ACCESS_KEY": heidi["access_key"], "SQUALL_SECRET_KEY": heidi["secret_key"]}
    for method, path in (("POST", "/_squall/elastic/next-size?size=1048576"),
                         ("GET", "/_squall/providers")):
        url = f"{gateway.endpoint}{path}"
        response = httpx.request(method, url, timeout=10,
                                 headers=status_headers(url, method=method, environ=env))
        assert response.status_code == 403 and response.json()["error"] == "AccessDenied"
    # Any user may ask for a sync (of what they wrote).
    url = f"{gateway.endpoint}/_squall/sync"
    sync = httpx.post(url, timeout=30, headers=status_headers(url, method="POST", environ=env))
    assert sync.status_code == 200
    assert squall_cli("qos", "set", "heidis", "--g0-bandwidth", "1MB/s",
                      "--endpoint", gateway.endpoint).returncode == 0  # the admin may


def test_bad_user_names_and_taken_names_get_one_line_messages(gateway: SquallProcess) -> None:
    add_user(gateway, "frank")
    for name, message in (("frank", "user 'frank' exists"),
                          ("admin", "'admin' is the gateway's own key pair"),
                          ("bad name!", "invalid user name")):
        result = squall_cli("user", "add", name, "--endpoint", gateway.endpoint)
        assert result.returncode == 1 and message in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_users_added_on_the_data_dir_are_seen_by_the_running_gateway(
        gateway: SquallProcess) -> None:
    added = squall_cli("user", "add", "grace", "--data-dir", str(gateway.data_dir), "--json")
    assert added.returncode == 0, added.stderr
    grace = json.loads(added.stdout)
    s3 = client(gateway.endpoint, grace["access_key"], grace["secret_key"])
    deadline = time.monotonic() + 5
    while True:
        try:
            assert s3.list_buckets()["Owner"]["DisplayName"] == "grace"
            break
        except ClientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    offline = squall_cli("user", "list", "--data-dir", str(gateway.data_dir))
    assert "grace" in offline.stdout and grace["secret_key"] not in offline.stdout


def test_users_reach_every_worker_within_a_second(tmp_path: Path) -> None:
    server = SquallProcess(tmp_path / "data", ["--workers", "2"]).start()
    try:
        user = add_user(server, "henry")
        s3 = client(server.endpoint, user["access_key"], user["secret_key"])
        time.sleep(1.0)
        # New connections land on either worker; every one of them knows the user.
        for _ in range(12):
            fresh = client(server.endpoint, user["access_key"], user["secret_key"])
            assert fresh.list_buckets()["Owner"]["DisplayName"] == "henry"
        s3.create_bucket(Bucket="henry")
        for n in range(8):  # keys owned by both workers
            s3.put_object(Bucket="henry", Key=f"k{n}", Body=b"v")
        assert squall_cli("user", "remove", "henry", "--endpoint",
                          server.endpoint).returncode == 0
        time.sleep(1.0)
        for _ in range(8):
            fresh = client(server.endpoint, user["access_key"], user["secret_key"])
            with pytest.raises(ClientError) as info:
                fresh.list_buckets()
            assert info.value.response["Error"]["Code"] == "InvalidAccessKeyId"
    finally:
        assert server.stop() == 0, server.log()
