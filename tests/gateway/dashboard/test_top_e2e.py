"""``squall top --once`` against a real gateway."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Any

import pytest

from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port

# The command as ``squall top`` runs it (gateway.commands.top.register/run).
TOP = [sys.executable, "-m", "gateway.commands.top"]


def top(*args: str, signed: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SQUALL_ACCESS_KEY", "SQUALL_SECRET_KEY", "AWS_ACCESS_KEY_ID",
                        "AWS_SECRET_ACCESS_KEY")}
    env["COLUMNS"] = "120"
    if signed:
        env.update(SQUALL_ACCESS_KEY=ACCESS_KEY, SQUALL_SECRET_KEY=SECRET_KEY)
    return subprocess.run([*TOP, *args], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize("signed", [True, False])
def test_once_prints_the_essentials(squall: SquallProcess, s3: Any, bucket: str,
                                    signed: bool) -> None:
    s3.put_object(Bucket=bucket, Key="a", Body=b"x" * 1000)
    missing = f"gone-{uuid.uuid4().hex[:8]}"
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket=bucket, Key=missing)
    done = top("--endpoint", squall.endpoint, "--once", signed=signed)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for label in ("cache fill", "dirty", "flush phase", "ingest", "flush", "volumes",
                  "cost", "errors", "recent errors", "ready", "backend posix reachable"):
        assert label in out, (label, out)
    assert f"/{bucket}/{missing}" in out and "NoSuchKey" in out
    assert "measuring" not in out  # --once waits for the first rates
    assert "\x1b[" not in out  # no terminal codes when not on a terminal


def test_unreachable_gateway_is_one_line() -> None:
    done = top("--endpoint", f"http://127.0.0.1:{free_port()}", "--once")
    assert done.returncode == 1
    assert done.stderr.startswith("squall top: cannot reach http://127.0.0.1:")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_not_a_gateway_is_one_line(squall: SquallProcess) -> None:
    done = top("--endpoint", f"{squall.endpoint}/_squall/health", "--once")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("squall top: ") and done.stderr.count("\n") == 1


def test_bad_interval_is_refused() -> None:
    done = top("--interval", "0", "--once")
    assert done.returncode == 2 and "--interval: must be from 0.2 to 3600" in done.stderr
