"""One MinIO server (one drive) on a free loopback port, stopped by its PID."""

from __future__ import annotations

import os
from pathlib import Path

from loadtests.bench.peers import AnsweringServer
from loadtests.bench.server import ServerProcess, free_port
from loadtests.minio.install import INSTALL_HINT, find_minio


def minio_env(access_key: str, secret_key: str) -> dict[str, str]:
    """The environment of a MinIO server with these root credentials, quiet and local:
    no browser, no update checks; drives on the root disk allowed (``MINIO_CI_CD``)."""
    return {**os.environ, "MINIO_ROOT_USER": access_key, "MINIO_ROOT_PASSWORD": secret_key,
            "MINIO_BROWSER": "off", "MINIO_UPDATE": "off", "MINIO_CI_CD": "1"}


def single_node(work: Path, access_key: str, secret_key: str) -> ServerProcess:
    """A MinIO server with its drive in ``work/data`` and its log in ``work/minio.log``;
    ready (``start()``) once it answers S3 requests."""
    binary = find_minio()
    if binary is None:
        raise FileNotFoundError(f"minio not found ({INSTALL_HINT})")
    (work / "data").mkdir(parents=True, exist_ok=True)
    port, console = free_port(), free_port()
    argv = [binary, "server", str(work / "data"), "--address", f"127.0.0.1:{port}",
            "--console-address", f"127.0.0.1:{console}", "--quiet"]
    return AnsweringServer(argv, endpoint=f"http://127.0.0.1:{port}",
                           log_path=work / "minio.log", env=minio_env(access_key, secret_key),
                           health_path="/")
