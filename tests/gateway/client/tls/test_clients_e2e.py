"""The client commands against an HTTPS gateway: ``squall mount``, ``sync``, ``cost`` and
``top`` trust its CA through ``--ca-bundle`` or ``AWS_CA_BUNDLE``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.client.tls.certs import Authority
from tests.gateway.client.tls.conftest import HttpsSquall
from tests.gateway.fuse_mount.conftest import _MISSING as FUSE_MISSING
from tests.gateway.fuse_mount.conftest import MountProcess, mount_command, mount_env
from tests.support.server import ACCESS_KEY, SECRET_KEY


@pytest.fixture(scope="module")
def https(ca: Authority, server_cert: tuple[Path, Path],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsSquall]:
    server = HttpsSquall(tmp_path_factory.mktemp("clients") / "data", *server_cert, ca.cert)
    yield server.start()
    server.stop()


def _squall(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_", "AWS_"))}
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", *args], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**base, "SQUALL_ACCESS_KEY": ACCESS_KEY,
                               "SQUALL_SECRET_KEY": SECRET_KEY, **env})


@pytest.mark.skipif(FUSE_MISSING is not None, reason=f"cannot mount FUSE: {FUSE_MISSING}")
def test_mount_over_https_with_ca_bundle(https: HttpsSquall, tmp_path: Path) -> None:
    s3: Any = https.s3()
    s3.create_bucket(Bucket="tls-mount")
    mount = MountProcess(https.endpoint, "tls-mount", tmp_path / "mnt",
                         ["--ca-bundle", str(https.ca)]).start()
    try:
        data = os.urandom(9 * 1024 * 1024 + 3)
        (mount.path / "file.bin").write_bytes(data)
        assert (mount.path / "file.bin").read_bytes() == data
    finally:
        assert mount.stop() == 0, mount.log()
    assert s3.get_object(Bucket="tls-mount", Key="file.bin")["Body"].read() == data


def test_mount_without_the_ca_is_refused(https: HttpsSquall, tmp_path: Path) -> None:
    (tmp_path / "mnt").mkdir()
    done = subprocess.run(mount_command(https.endpoint, "tls-mount", tmp_path / "mnt"),
                          env=mount_env(), capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1
    assert done.stderr.startswith("squall mount: cannot reach https://")
    assert "certificate verify failed" in done.stderr and "--ca-bundle" in done.stderr


def test_sync_with_ca_bundle_or_aws_ca_bundle(https: HttpsSquall) -> None:
    done = _squall("sync", "--endpoint", https.endpoint, "--ca-bundle", str(https.ca))
    assert done.returncode == 0, done.stderr
    done = _squall("sync", "--endpoint", https.endpoint, AWS_CA_BUNDLE=str(https.ca))
    assert done.returncode == 0, done.stderr
    refused = _squall("sync", "--endpoint", https.endpoint)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"squall sync: cannot reach {https.endpoint}: TLS "
                                     "certificate verify failed: ")
    assert "--ca-bundle" in refused.stderr and refused.stderr.count("\n") == 1
    missing = _squall("sync", "--endpoint", https.endpoint, "--ca-bundle", "/nonexistent.pem")
    assert missing.returncode == 2
    assert missing.stderr.strip() == ("squall sync: --ca-bundle /nonexistent.pem: cannot "
                                      "read it: No such file or directory")


def test_cost_and_top_with_ca_bundle(https: HttpsSquall) -> None:
    done = _squall("cost", "--endpoint", https.endpoint, "--json", "--ca-bundle",
                   str(https.ca))
    assert done.returncode == 0, done.stderr
    done = _squall("top", "--endpoint", https.endpoint, "--once",
                   AWS_CA_BUNDLE=str(https.ca))
    assert done.returncode == 0, done.stderr
    refused = _squall("cost", "--endpoint", https.endpoint)
    assert refused.returncode == 1
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr


@pytest.mark.parametrize("command", [("qos", "show"), ("user", "list"), ("providers", "list")])
def test_admin_commands_with_ca_bundle(https: HttpsSquall, command: tuple[str, ...]) -> None:
    done = _squall(*command, "--endpoint", https.endpoint, "--ca-bundle", str(https.ca))
    if command[0] == "providers":  # a posix store has none: the gateway's refusal
        assert done.returncode == 1 and done.stderr.startswith("squall providers: "), done
        assert "certificate" not in done.stderr and done.stderr.count("\n") == 1
    else:
        assert done.returncode == 0, done.stderr
    refused = _squall(*command, "--endpoint", https.endpoint)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"squall {command[0]}: cannot reach {https.endpoint}: "
                                     "TLS certificate verify failed: ")
    assert refused.stderr.count("\n") == 1
