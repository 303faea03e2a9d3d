"""Servers for the load-test tests: a real ``squall serve`` (skipped while it cannot start),
or moto's standalone S3 server with ``LOADTESTS_SERVER=moto``."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loadtests.bench.server import ServerFailed, ServerProcess, free_port

ACCESS_KEY = "LOADTESTACCESS"
SECRET_KEY = "loadtest-secret-key"
CREDENTIALS = {"SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY}

StartServer = Callable[[], ServerProcess]


def server_kind() -> str:
    kind = os.environ.get("LOADTESTS_SERVER", "squall")
    if kind not in ("squall", "moto"):
        raise pytest.UsageError(f"LOADTESTS_SERVER must be squall or moto, not {kind!r}")
    return kind


def child_env() -> dict[str, str]:
    """Environment for servers and locust subprocesses: the test credentials only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SQUALL_"))}
    return {**env, **CREDENTIALS}


def server_argv(kind: str, port: int, base: Path) -> tuple[list[str], str]:
    """The command line and the health path of one server."""
    if kind == "moto":
        return [
            shutil.which("moto_server") or "moto_server",
            "-H",
            "127.0.0.1",
            "-p",
            str(port),
        ], "/"
    argv = [
        sys.executable, "-m", "gateway.commands.cli", "serve",
        "--listen", f"127.0.0.1:{port}",
        "--data-dir", str(base / "data"),
        "--backend", f"posix:{base / 'backend'}",
    ]  # fmt: skip
    return argv, "/_squall/health"


@pytest.fixture(scope="session")
def start_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartServer]:
    """Start servers of the chosen kind; all are stopped (by PID) at the end of the session."""
    kind = server_kind()
    if kind == "squall" and importlib.util.find_spec("gateway.commands.cli") is None:
        pytest.skip("the gateway is not importable yet (gateway.commands.cli); use LOADTESTS_SERVER=moto")
    started: list[ServerProcess] = []

    def start() -> ServerProcess:
        port = free_port()
        base = tmp_path_factory.mktemp(f"{kind}-{port}")
        (base / "backend").mkdir()
        argv, health = server_argv(kind, port, base)
        server = ServerProcess(
            argv,
            endpoint=f"http://127.0.0.1:{port}",
            log_path=base / "server.log",
            env=child_env(),
            health_path=health,
        )
        try:
            server.start(timeout=60)
        except ServerFailed as exc:
            if kind == "squall":
                last = [line for line in str(exc).splitlines() if line.strip()][-1]
                pytest.skip(f"squall serve does not start yet ({last}); LOADTESTS_SERVER=moto")
            raise
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def endpoint(start_server: StartServer) -> str:
    """One server shared by the tests of the session."""
    return start_server().endpoint
