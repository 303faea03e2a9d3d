"""Real upstream S3 services on loopback for the s3 backend tests: moto_server and Squall."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.server import free_port

MOTO_ACCESS_KEY = "testing"
MOTO_SECRET_KEY = "testing"  # moto accepts any credentials


class MotoProcess:
    """``moto_server -H 127.0.0.1 -p PORT`` as a subprocess, stopped by its PID."""

    def __init__(self, log_path: Path, *, min_part_size: int) -> None:
        self.port = free_port()
        self.log_path = log_path
        self.min_part_size = min_part_size
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> MotoProcess:
        exe = shutil.which("moto_server")
        assert exe is not None, "moto_server is not installed"
        env = {**os.environ, "S3_UPLOAD_PART_MIN_SIZE": str(self.min_part_size),
               "MOTO_CALL_RESET_API": "false"}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(self.port)],
                                         env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.proc.returncode}")
            try:
                httpx.get(f"{self.endpoint}/moto-api/", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("moto_server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
