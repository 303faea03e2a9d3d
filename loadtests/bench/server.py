"""Start a server under test on a free loopback port, wait until it is healthy, stop it by PID."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from gateway.client.signing import status_headers

HEALTH_PATH = "/_squall/health"
STATUS_PATH = "/_squall/status"


class ServerFailed(RuntimeError):
    """The server exited or never became healthy; the message ends with its log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def is_healthy(url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def squall_status(endpoint: str) -> dict[str, Any] | None:
    """A Squall endpoint's ``/_squall/status``; None for another server (or none)."""
    try:
        url = endpoint.rstrip("/") + STATUS_PATH
        request = urllib.request.Request(url, headers=status_headers(url))
        with urllib.request.urlopen(request, timeout=5) as resp:
            status = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None


def reported_durability(endpoint: str) -> str | None:
    """The ``durability`` a Squall endpoint reports in ``/_squall/status`` (None: not said)."""
    value = (squall_status(endpoint) or {}).get("durability")
    return value if isinstance(value, str) else None


def cache_counters(endpoint: str) -> dict[str, int] | None:
    """Where a Squall endpoint's cache tier sent requests so far (``/_squall/status``):
    writes to the cache or past it, reads from the cache or the backend, flushes. None
    for an endpoint without those counters."""
    status = squall_status(endpoint) or {}
    admission = status.get("admission")
    if not isinstance(admission, dict):
        return None
    return {"writes cached": admission.get("routed_to_cache", 0),
            "writes past": admission.get("routed_to_backend", 0),
            "read hits": status.get("hits", 0), "read misses": status.get("misses", 0),
            "read copies": status.get("read_copies_total", 0),
            "flushes": status.get("flushes_total", 0)}


def wait_settled(endpoint: str, timeout: float = 300.0) -> float | None:
    """Wait until a Squall endpoint reports nothing unflushed (``dirty_objects`` 0 in
    ``/_squall/status``), so that one workload's deferred writes are not flushed during
    the next one's clock. Returns the seconds waited; None for an endpoint without that
    status (another server) or when ``timeout`` passed first."""
    start = time.monotonic()
    while True:
        dirty = (squall_status(endpoint) or {}).get("dirty_objects")
        if dirty is None:
            return None
        waited = time.monotonic() - start
        if dirty == 0:
            return waited
        if waited > timeout:
            return None
        time.sleep(0.2)


class ServerProcess:
    """One server process; its output goes to ``log_path``.

    Use as a context manager, or call :meth:`start` and :meth:`stop` (idempotent).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        endpoint: str,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        health_path: str = HEALTH_PATH,
        cwd: Path | None = None,
    ) -> None:
        self.argv = list(argv)
        self.endpoint = endpoint.rstrip("/")
        self.health_url = self.endpoint + health_path
        self.log_path = log_path
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, timeout: float = 60.0) -> Self:
        """Start the process and wait until the health URL answers 200."""
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=self._env, cwd=self._cwd
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ServerFailed(
                    f"{self.argv[0]} exited with {self._proc.returncode}:\n{self.log_tail()}"
                )
            if self.healthy():
                return self
            time.sleep(0.1)
        self.stop()
        raise ServerFailed(
            f"{self.health_url} not healthy after {timeout:.0f}s:\n{self.log_tail()}"
        )

    def healthy(self) -> bool:
        """Ready to serve: the health URL answers 200."""
        return is_healthy(self.health_url)

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the process by its PID, SIGKILL it if it lingers, and reap it."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def etcd_server(work: Path) -> ServerProcess:
    """A one-member etcd (Debian's ``etcd-server``) on free loopback ports, its data under
    ``work/etcd``: the coordinator of the cluster benchmarks."""
    client, peer = free_port(), free_port()
    argv = ["etcd", "--name", "bench", "--data-dir", str(work / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"bench=http://127.0.0.1:{peer}"]
    return ServerProcess(argv, endpoint=f"http://127.0.0.1:{client}",
                         log_path=work / "etcd.log", health_path="/health")


def coordinator_url(etcd: ServerProcess) -> str:
    """The ``--coordinator`` of the members coordinated by ``etcd``."""
    return "etcd://" + etcd.endpoint.split("://", 1)[1]


def squall_credentials(prefix: str = "BENCH") -> dict[str, str]:
    """A fresh key pair as the ``SQUALL_*`` variables a gateway and its clients read."""
    return {"SQUALL_ACCESS_KEY": prefix + secrets.token_hex(6).upper(),
            "SQUALL_SECRET_KEY": secrets.token_urlsafe(24)}


def squall_server(name: str, args: Sequence[str], work: Path,
                  env: Mapping[str, str]) -> ServerProcess:
    """``squall serve`` on a free loopback port with its data under ``work/name`` (status
    views public on loopback: the driver samples them)."""
    port = free_port()
    argv = [sys.executable, "-m", "gateway.commands.cli", "serve", "--listen", f"127.0.0.1:{port}",
            "--data-dir", str(work / name), "--log-level", "warning", "--public-status",
            *args]
    return ServerProcess(argv, endpoint=f"http://127.0.0.1:{port}",
                         log_path=work / f"{name}.log", env={**os.environ, **env})
