"""Peer S3 servers measured beside Squall in the same run: MinIO and versitygw.

Both install with ``go install`` (docs/loadtests.md) and are started from PATH (or
``~/go/bin``) on a free loopback port with their data in a temporary directory and the
run's credentials. MinIO fsyncs each PUT; versitygw's posix backend does not.
"""

from __future__ import annotations

import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gateway.client.credentials import Credentials
from loadtests.bench.server import ServerProcess, free_port

KNOWN_PEERS = ("minio", "versitygw")


@dataclass(frozen=True, slots=True)
class PeerSpec:
    """How to start one peer server."""

    name: str
    binary: str
    fsync: bool
    argv: Callable[[str, int, Path], list[str]]  # (binary, port, data dir) -> argv
    env: Callable[[Credentials], dict[str, str]]
    health_path: str
    install: str


def _minio_argv(binary: str, port: int, data: Path) -> list[str]:
    console = free_port()
    return [binary, "server", str(data), "--address", f"127.0.0.1:{port}",
            "--console-address", f"127.0.0.1:{console}", "--quiet"]


def _versitygw_argv(binary: str, port: int, data: Path) -> list[str]:
    return [binary, "--port", f"127.0.0.1:{port}", "posix", str(data)]


PEERS: dict[str, PeerSpec] = {
    "minio": PeerSpec(
        "minio", "minio", True, _minio_argv,
        lambda c: {"MINIO_ROOT_USER": c.access_key, "MINIO_ROOT_PASSWORD": c.secret_key,
                   "MINIO_BROWSER": "off", "MINIO_UPDATE": "off"},
        "/", "scripts/install-minio.sh"),
    "versitygw": PeerSpec(
        "versitygw", "versitygw", False, _versitygw_argv,
        lambda c: {"ROOT_ACCESS_KEY": c.access_key, "ROOT_SECRET_KEY": c.secret_key},
        "/", "go install github.com/versity/versitygw/cmd/versitygw@latest"),
}


def find_binary(name: str) -> str | None:
    """``name`` on PATH, else in Go's install directory."""
    found = shutil.which(name)
    if found:
        return found
    gobin = Path(os.environ.get("GOBIN") or Path.home() / "go" / "bin") / name
    return str(gobin) if gobin.is_file() and os.access(gobin, os.X_OK) else None


def parse_peers(text: str) -> list[str]:
    """``auto`` (every known peer found), ``none``, or a comma-separated list."""
    if text == "none":
        return []
    if text == "auto":
        return [name for name in KNOWN_PEERS if find_binary(PEERS[name].binary)]
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise ValueError(f"unknown peers {unknown}; known: {', '.join(KNOWN_PEERS)}")
    missing = [n for n in names if not find_binary(PEERS[n].binary)]
    if missing:
        hints = "; ".join(PEERS[n].install for n in missing)
        raise ValueError(f"{', '.join(missing)} not found on PATH ({hints})")
    return names


class AnsweringServer(ServerProcess):
    """A server ready once its health path answers anything but a 5xx: an unsigned
    request gets 403 from a ready S3 server, 503 from a MinIO still initialising (whose
    own health URLs answer 200 before it takes requests)."""

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.health_url, timeout=1.0):
                return True
        except urllib.error.HTTPError as exc:
            return exc.code < 500
        except (urllib.error.URLError, OSError, ValueError):
            return False


def peer_server(spec: PeerSpec, credentials: Credentials, work: Path) -> ServerProcess:
    """The peer on a free loopback port, its data under ``work/<name>``."""
    binary = find_binary(spec.binary)
    if binary is None:
        raise ValueError(f"{spec.name} not found ({spec.install})")
    data = work / spec.name
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    return AnsweringServer(spec.argv(binary, port, data), endpoint=f"http://127.0.0.1:{port}",
                           log_path=work / f"{spec.name}.log",
                           env={**os.environ, **spec.env(credentials)},
                           health_path=spec.health_path)
