"""Start and stop real ``squall serve`` processes on loopback ports for tests."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import httpx

ACCESS_KEY = "SQUALLTESTACCESS"
SECRET_KEY = "squall-test-secret-key"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _takes_workers(args: Sequence[str]) -> bool:
    """Whether ``SQUALL_TEST_WORKERS`` applies to a gateway started with ``args``: not
    when they choose a worker count, or what ``--workers`` refuses (members of a cluster
    that changes live, the single-process blobseer_like backend)."""
    return not any(a in ("--workers", "--peers-file", "--join")
                   or a.startswith("blobseer_like:")
                   for a in args)


def run_sync(server: SquallProcess, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``squall sync`` against ``server`` with the test credentials: flush everything."""
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", "sync", "--endpoint",
                           server.endpoint], capture_output=True, text=True, timeout=timeout,
                          check=False, env={**os.environ, "SQUALL_ACCESS_KEY": ACCESS_KEY,
                                            "SQUALL_SECRET_KEY": SECRET_KEY})


class SquallProcess:
    """A gateway subprocess; ``stop()`` (SIGTERM) or ``kill()`` (SIGKILL) by its PID."""

    def __init__(self, data_dir: Path, args: Sequence[str] = (), *,
                 env: dict[str, str] | None = None, port: int | None = None,
                 public_status: bool = True) -> None:
        """``public_status``: the status views open to unsigned reads, as most tests
        (not about access) read them; False keeps the gateway's closed default."""
        self.data_dir = data_dir
        self.port = port or free_port()
        self.args = list(args)
        workers = os.environ.get("SQUALL_TEST_WORKERS")
        if workers and _takes_workers(self.args):
            # The suite runs against multi-process gateways too (docs/workers.md).
            self.args += ["--workers", workers]
        self.env = {"SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY,
                    "SQUALL_PUBLIC_STATUS": "true" if public_status else "false",
                    **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}-{self.port}.log"

    @property
    def workers(self) -> int:
        """The worker processes the gateway runs (``--workers``; 1 without)."""
        args = self.args
        for flag, value in itertools.pairwise(args):
            if flag == "--workers" and value.isdigit():
                return int(value)
        return 1

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def verify(self) -> ssl.SSLContext | bool:
        """How a client verifies the gateway's certificate (an HTTPS subclass says)."""
        return True

    def start(self, timeout: float = 30.0) -> Self:
        env = {**os.environ, **self.env}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gateway.commands.cli", "serve", "--listen",
                 f"127.0.0.1:{self.port}", "--data-dir", str(self.data_dir), "--log-level",
                 "warning", *self.args], env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"squall exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.endpoint}/_squall/health", timeout=1,
                             verify=self.verify()).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"squall did not become healthy:\n{self.log()}")

    def counter(self, name: str) -> int:
        """A counter of ``/_squall/status``, summed over the workers of ``--workers N``
        (each worker's status is its own)."""
        body = httpx.get(f"{self.endpoint}/_squall/status?workers=all", timeout=10).json()
        return sum(int(w[name]) for w in body.get("workers", [body]))

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: the crash the write path must survive."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
