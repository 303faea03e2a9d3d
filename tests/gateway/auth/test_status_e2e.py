"""The status surface is closed by default: the admin's signature or the status token
read it, ``--public-status`` opens it; another user is refused, or sees the ring alone of
the cluster view; health stays open. Files the gateway makes are private."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.client.signing import status_headers
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port

TOKEN = "status-token-0123456789"
GATED = ("/_squall/status", "/_squall/metrics", "/_squall/cluster", "/_squall/ui/data")
SIGNED = {"SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY}


@pytest.fixture(scope="module", params=[1, 2], ids=["one-process", "two-workers"])
def closed(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    server = SquallProcess(tmp_path_factory.mktemp("closed") / "data",
                           ["--workers", str(request.param)],
                           env={"SQUALL_STATUS_TOKEN": TOKEN}, public_status=False).start()
    yield server
    assert server.stop() == 0, server.log()


@pytest.mark.parametrize("path", GATED)
def test_status_views_refuse_unsigned_requests_by_default(closed: SquallProcess,
                                                         path: str) -> None:
    response = httpx.get(closed.endpoint + path, timeout=10)
    assert response.status_code == 403
    assert response.json()["error"] == "AccessDenied"
    wrong = httpx.get(closed.endpoint + path, headers={"Authorization": "Bearer nope"},
                      timeout=10)
    assert wrong.status_code == 403


@pytest.mark.parametrize("path", GATED)
def test_the_bearer_token_and_a_signature_open_them(closed: SquallProcess, path: str) -> None:
    url = closed.endpoint + path
    assert httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"},
                     timeout=10).status_code == 200
    assert httpx.get(url, headers=status_headers(url, environ=SIGNED),
                     timeout=10).status_code == 200


@pytest.mark.parametrize("path", ["/_squall/health", "/_squall/ui",
                                  "/_squall/ui/static/dashboard.js"])
def test_health_and_the_dashboard_page_stay_open(closed: SquallProcess, path: str) -> None:
    """The page and its files hold no figures; the page asks for the token."""
    assert httpx.get(closed.endpoint + path, timeout=10).status_code == 200


def test_a_user_who_is_not_the_admin_reads_no_status(closed: SquallProcess) -> None:
    """Other users' bucket and object names, errors and keys are in these views."""
    added = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "user", "add", "carol",
                            "--endpoint", closed.endpoint, "--json"], timeout=60,
                           capture_output=True, text=True, env={**os.environ, **SIGNED},
                           check=False)
    assert added.returncode == 0, added.stderr
    carol = json.loads(added.stdout)
    env = {"SQUALL_ACCESS_KEY": carol["access_key"], "SQUALL_SECRET_KEY": carol["secret_key"]}
    for path in GATED:
        url = closed.endpoint + path
        response = httpx.get(url, headers=status_headers(url, environ=env), timeout=10)
        if path != "/_squall/cluster":
            assert response.status_code == 403, (path, response.text)
            assert response.json()["error"] == "AccessDenied"
            continue
        # What a client needs to route requests (the FUSE mount's --route-to-owners).
        assert response.status_code == 200
        assert set(response.json()) <= {"format", "hash", "revision", "self", "serving",
                                        "members"}
        assert "members" in response.json()


def test_a_signature_with_an_unknown_key_is_refused(closed: SquallProcess) -> None:
    url = closed.endpoint + "/_squall/status"
    env = {"SQUALL_ACCESS_KEY": "NOSUCHKEY", "SQUALL_SECRET_KEY": SECRET_KEY}
    response = httpx.get(url, headers=status_headers(url, environ=env), timeout=10)
    assert response.status_code == 403
    assert response.json()["error"] == "InvalidAccessKeyId"


def test_command_line_clients_sign_their_status_reads(closed: SquallProcess) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_", "AWS_"))}
    for args in (("cost", "--endpoint", closed.endpoint, "--json"),
                 ("sync", "--endpoint", closed.endpoint)):
        signed = subprocess.run([sys.executable, "-m", "gateway.commands.cli", *args], timeout=60,
                                capture_output=True, text=True, env={**env, **SIGNED},
                                check=False)
        assert signed.returncode == 0, signed.stderr
    token = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "cost", "--endpoint",
                            closed.endpoint], timeout=60, capture_output=True, text=True,
                           env={**env, "SQUALL_STATUS_TOKEN": TOKEN}, check=False)
    assert token.returncode == 0, token.stderr


def test_public_status_opens_the_views(tmp_path: Path) -> None:
    server = SquallProcess(tmp_path / "data", public_status=True).start()
    try:
        for path in GATED:
            assert httpx.get(server.endpoint + path, timeout=10).status_code == 200, path
        assert httpx.get(server.endpoint + "/_squall/users", timeout=10).status_code == 403
    finally:
        assert server.stop() == 0, server.log()


def test_short_secrets_and_tokens_are_refused_with_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUALL_")}
    for extra in ({"SQUALL_ACCESS_KEY": "K", "SQUALL_SECRET_KEY": "short-secret"},
                  {**SIGNED, "SQUALL_STATUS_TOKEN": "tiny"}):
        result = subprocess.run(
            [sys.executable, "-m", "gateway.commands.cli", "serve", "--listen",
             f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "d")],
            env={**env, **extra}, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 2
        assert "must have at least 16 characters" in result.stderr, result.stderr
        assert not (tmp_path / "d").exists()


def _modes(root: Path) -> list[str]:
    """Files and directories under ``root`` open to group or others."""
    loose = []
    for path in [root, *root.rglob("*")]:
        if path.is_socket() or path.is_symlink():
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            loose.append(f"{path.relative_to(root.parent)} {oct(mode)}")
    return loose


def test_files_the_gateway_creates_are_private(tmp_path: Path) -> None:
    import boto3
    from botocore.config import Config

    objects = tmp_path / "objects"
    objects.mkdir(mode=0o755)
    outside = objects / "bkt" / "outside.txt"  # a file another tool wrote
    server = SquallProcess(tmp_path / "data", ["--backend", f"posix:{objects}"]).start()
    try:
        s3 = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}))
        s3.create_bucket(Bucket="bkt")
        s3.put_object(Bucket="bkt", Key="dir/k", Body=b"private")
        subprocess.run([sys.executable, "-m", "gateway.commands.cli", "user", "add", "ivy",
                        "--endpoint", server.endpoint], env={**os.environ, **SIGNED},
                       check=True, capture_output=True, timeout=60)
        outside.write_bytes(b"written outside")
        os.chmod(outside, 0o644)
        assert s3.get_object(Bucket="bkt", Key="outside.txt")["Body"].read() == \
            b"written outside"
        sync = subprocess.run([sys.executable, "-m", "gateway.commands.cli", "sync", "--endpoint",
                               server.endpoint], env={**os.environ, **SIGNED},
                              capture_output=True, text=True, timeout=60, check=False)
        assert sync.returncode == 0, sync.stderr
    finally:
        assert server.stop() == 0, server.log()
    assert (objects / "bkt" / "dir" / "k").read_bytes() == b"private"
    assert _modes(tmp_path / "data") == []
    loose = [p for p in _modes(objects) if "outside.txt" not in p and p != "objects 0o755"]
    assert loose == []
    assert stat.S_IMODE((tmp_path / "data" / "users.json").stat().st_mode) == 0o600
