"""``squall serve --tls-cert --tls-key``: HTTPS through boto3, the aws CLI and curl, in one
process and with ``--workers 2``."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.client.tls.certs import Authority
from tests.gateway.client.tls.conftest import HttpsSquall
from tests.support.server import ACCESS_KEY, SECRET_KEY

BIG = 64 * 1024 * 1024


@pytest.fixture(scope="module", params=["1", "2"], ids=["one-process", "workers-2"])
def https(request: pytest.FixtureRequest, ca: Authority, server_cert: tuple[Path, Path],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsSquall]:
    server = HttpsSquall(tmp_path_factory.mktemp("https") / "data", *server_cert, ca.cert,
                         ["--workers", request.param])
    yield server.start()
    server.stop()


def test_boto3_over_https_trusting_the_ca(https: HttpsSquall) -> None:
    s3: Any = https.s3()
    s3.create_bucket(Bucket="tls-small")
    s3.put_object(Bucket="tls-small", Key="a/b.txt", Body=b"hello over tls")
    assert s3.get_object(Bucket="tls-small", Key="a/b.txt")["Body"].read() == b"hello over tls"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="tls-small")["Contents"]]
    assert keys == ["a/b.txt"]


def test_large_get_over_https_is_intact(https: HttpsSquall) -> None:
    """sendfile cannot write through TLS: the response falls back to normal writes."""
    s3: Any = https.s3()
    s3.create_bucket(Bucket="tls-big")
    data = os.urandom(BIG)
    s3.put_object(Bucket="tls-big", Key="big", Body=data)
    digest = hashlib.sha256()
    size = 0
    for chunk in s3.get_object(Bucket="tls-big", Key="big")["Body"].iter_chunks(1 << 20):
        digest.update(chunk)
        size += len(chunk)
    assert size == BIG
    assert digest.digest() == hashlib.sha256(data).digest()
    ranged = s3.get_object(Bucket="tls-big", Key="big", Range="bytes=1000-2000999")
    assert ranged["Body"].read() == data[1000:2001000]


def test_aws_cli_with_ca_bundle(https: HttpsSquall, tmp_path: Path) -> None:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
           "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    env.pop("AWS_CA_BUNDLE", None)
    source = tmp_path / "up.bin"
    source.write_bytes(os.urandom(3 * 1024 * 1024 + 5))
    aws = [shutil.which("aws") or "aws", "--endpoint-url", https.endpoint]

    def run(*args: str, ca: bool = True) -> subprocess.CompletedProcess[str]:
        extra = ["--ca-bundle", str(https.ca)] if ca else []
        return subprocess.run([*aws, *extra, *args], capture_output=True, text=True,
                              env=env, timeout=120, check=False)

    assert run("s3", "mb", "s3://tls-cli").returncode == 0
    done = run("s3", "cp", str(source), "s3://tls-cli/up.bin")
    assert done.returncode == 0, done.stderr
    back = tmp_path / "back.bin"
    done = run("s3", "cp", "s3://tls-cli/up.bin", str(back))
    assert done.returncode == 0, done.stderr
    assert back.read_bytes() == source.read_bytes()
    refused = run("s3", "ls", "s3://tls-cli", ca=False)
    assert refused.returncode != 0
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr or "SSL" in refused.stderr


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_needs_the_ca(https: HttpsSquall) -> None:
    url = f"{https.endpoint}/_squall/health"
    without = subprocess.run(["curl", "-sS", "-o", os.devnull, url], capture_output=True,
                             text=True, timeout=30, check=False)
    assert without.returncode == 60, without.stderr  # peer certificate cannot be verified
    trusted = subprocess.run(["curl", "-sS", "--cacert", str(https.ca), "-o", os.devnull,
                              "-w", "%{http_code}", url], capture_output=True, text=True,
                             timeout=30, check=False)
    assert trusted.returncode == 0, trusted.stderr
    assert trusted.stdout == "200"


def test_plain_http_on_the_tls_port_gets_no_answer(https: HttpsSquall) -> None:
    import httpx

    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{https.port}/_squall/health", timeout=5)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_idle_tls_clients_do_not_hold_the_stop(ca: Authority, server_cert: tuple[Path, Path],
                                               tmp_path: Path, workers: str) -> None:
    """An idle keep-alive client sends no close_notify: the gateway still stops cleanly
    within its stop's bound (exit 0, not the SIGKILL that follows a hung stop)."""
    server = HttpsSquall(tmp_path / "data", *server_cert, ca.cert, ["--workers", workers])
    server.start()
    s3: Any = server.s3()  # kept open (and idle) across the stop
    s3.create_bucket(Bucket="tls-idle")
    s3.put_object(Bucket="tls-idle", Key="k", Body=b"kept")
    assert server.stop(timeout=20) == 0, server.log()
    restarted = HttpsSquall(tmp_path / "data", *server_cert, ca.cert,
                            ["--workers", workers], port=server.port).start()
    try:
        assert restarted.s3().get_object(  # type: ignore[attr-defined]
            Bucket="tls-idle", Key="k")["Body"].read() == b"kept"
    finally:
        restarted.stop()
