"""`squall sync`: progress while it waits, an exact summary, one-line errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.commands.cli import main
from tests.conftest import make_client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port
from tests.support.signing import send


def sync(endpoint: str, *args: str, secret: str = SECRET_KEY
         ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": secret}
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", "sync", "--endpoint",
                           endpoint, *args], capture_output=True, text=True, timeout=120,
                          check=False, env=env)


@pytest.fixture
def slow_backend(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A gateway whose backend takes 1 MiB/s: flushing takes seconds."""
    server = SquallProcess(tmp_path / "data", ["--cache-admission", "cache",
                                               "--backend-bandwidth", "1MiB/s"]).start()
    yield server
    assert server.stop() == 0, server.log()


def test_progress_and_exact_summary(slow_backend: SquallProcess) -> None:
    s3 = make_client(slow_backend.endpoint)
    s3.create_bucket(Bucket="burst")
    for n in range(6):
        s3.put_object(Bucket="burst", Key=f"part-{n}", Body=os.urandom(1024 * 1024))
    result = sync(slow_backend.endpoint)
    assert result.returncode == 0, result.stderr
    # Not a terminal: a progress line at once, then every few seconds.
    progress = [line for line in result.stderr.splitlines() if " left" in line]
    assert progress, result.stderr
    assert re.search(r"squall sync: [\d.]+ [KMG]?i?B left in \d+ object\(s\), [\d.]+ "
                     r"[KMG]?i?B flushed, [\d.]+ [KMG]?i?B/s", progress[0]), progress[0]
    # Everything written was flushed during the sync, or before it started (phase 1
    # flushes with spare bandwidth): the summary counts exactly what the gateway
    # flushed while the sync ran.
    match = re.search(r"flushed: ([\d.]+) MiB in (\d+) object\(s\) during this sync",
                      result.stdout)
    assert match, result.stdout
    assert 0 < float(match.group(1)) <= 6.0 and 1 <= int(match.group(2)) <= 6
    assert "everything dirty is on the backend" in result.stdout
    again = sync(slow_backend.endpoint)
    assert "flushed: 0 B in 0 object(s) during this sync" in again.stdout


def test_failures_are_one_line_and_non_zero(squall: SquallProcess, bucket: str) -> None:
    cases = [
        (sync(squall.endpoint, "--bucket", "no-such-bucket-here"),
         f"squall sync: no such bucket 'no-such-bucket-here' at {squall.endpoint}"),
        (sync(squall.endpoint, secret="wrong"),
         "squall sync: SignatureDoesNotMatch: "),
        (sync(squall.endpoint, "--bucket", bucket, secret="wrong"),
         "squall sync: the gateway refused the credentials"),
        (sync(f"http://127.0.0.1:{free_port()}"), "squall sync: cannot reach http://127.0.0.1:"),
    ]
    for result, message in cases:
        assert result.returncode == 1, result
        assert result.stderr.startswith(message), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "{" not in result.stderr and "Traceback" not in result.stderr
    ok = sync(squall.endpoint, "--bucket", bucket)
    assert ok.returncode == 0 and f"everything dirty of bucket {bucket}" in ok.stdout


def test_left_shrinks_while_an_object_is_partly_flushed(
        slow_backend: SquallProcess, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """One object of 6 MiB, then one of 10 MiB, through a 1 MiB/s backend: the bytes already
    sent of it count as flushed (in the gateway's NDJSON progress and in what squall sync says
    is left). The command runs in this process: a new interpreter may take longer to start
    than the flush takes on a loaded machine."""
    s3 = make_client(slow_backend.endpoint)
    s3.create_bucket(Bucket="one")
    s3.put_object(Bucket="one", Key="big", Body=os.urandom(6 * 1024 * 1024))
    url = f"{slow_backend.endpoint}/_squall/sync?bucket=one"
    answer = send("POST", url)
    assert answer.status_code == 200, answer.text
    lines = [json.loads(line) for line in answer.text.splitlines()]
    assert lines[-1]["flushed"] is True
    partial = [line["done"] for line in lines[:-1] if 0 < line["done"] < line["total"]]
    assert len(set(partial)) >= 2, lines  # grew while the one object was on its way
    assert partial == sorted(partial)
    monkeypatch.setenv("SQUALL_ACCESS_KEY", ACCESS_KEY)
    monkeypatch.setenv("SQUALL_SECRET_KEY", SECRET_KEY)
    s3.put_object(Bucket="one", Key="big", Body=os.urandom(10 * 1024 * 1024))
    assert main(["sync", "--endpoint", slow_backend.endpoint]) == 0
    err = capsys.readouterr().err
    left = [float(m.group(1)) * {"B": 1, "KiB": 1024, "MiB": 1024 ** 2}[m.group(2)]
            for m in re.finditer(r"squall sync: ([\d.]+) (B|KiB|MiB) left in 1 object", err)]
    # while the one object is still not flushed, what is left is less than its size
    assert left and all(b < 10 * 1024 * 1024 for b in left[1:] or left), err
