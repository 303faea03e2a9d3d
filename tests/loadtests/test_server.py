"""ServerProcess: started on a free port, healthy or failing clearly, stopped by PID."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from loadtests.bench.server import (
    ServerFailed,
    ServerProcess,
    free_port,
    is_healthy,
    reported_durability,
)


def test_start_waits_for_health_and_stop_ends_the_process(tmp_path: Path) -> None:
    (tmp_path / "_squall").mkdir()
    (tmp_path / "_squall" / "status").write_text('{"ready": true, "durability": "none"}')
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    server = ServerProcess(
        argv, endpoint=f"http://127.0.0.1:{port}", log_path=tmp_path / "log", health_path="/",
        cwd=tmp_path,
    )  # fmt: skip
    with server:
        pid = server.pid
        assert pid is not None
        assert is_healthy(f"http://127.0.0.1:{port}/")
        assert reported_durability(server.endpoint) == "none"
        (tmp_path / "_squall" / "status").write_text("[]")
        assert reported_durability(server.endpoint) is None
    assert server.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped, gone
    assert not is_healthy(f"http://127.0.0.1:{port}/")
    assert reported_durability(f"http://127.0.0.1:{port}") is None
    server.stop()  # idempotent


def test_a_server_that_exits_fails_with_its_log(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('bad flag --nope'); sys.exit(3)"]
    server = ServerProcess(argv, endpoint="http://127.0.0.1:9", log_path=tmp_path / "log")
    with pytest.raises(ServerFailed, match=r"exited with 3:\nbad flag --nope"):
        server.start(timeout=30)
