"""The benchmark driver end to end: tiny objects, a couple of seconds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadtests.bench.cli import main, median_run
from loadtests.bench.engine import Measurement
from loadtests.bench.locust_run import LocustWorkload, locust_command, measurement_from_stats
from loadtests.locust_csv import parse_stats
from tests.loadtests.conftest import ACCESS_KEY, child_env, server_kind
from tests.loadtests.test_locust_csv import STATS

TINY = [
    "--large-size", "64KiB", "--large-count", "3", "--large-clients", "1,2",
    "--small-count", "20", "--small-clients", "4",
    "--mixed-size", "16KiB", "--mixed-count", "20", "--mixed-clients", "2",
    "--mixed-objects", "4", "--duration", "5s", "--peers", "none",
]  # fmt: skip
TITLES = [
    "PUT 64KiB x1", "GET 64KiB x1", "PUT 64KiB x2", "GET 64KiB x2",
    "PUT 4KiB x4", "GET 4KiB x4", "GET/PUT/STAT/DELETE 16KiB x2",
]  # fmt: skip


def test_tiny_run_prints_one_markdown_table(endpoint: str) -> None:
    """Every workload against the configurations it starts and an external endpoint."""
    if server_kind() == "moto":
        servers = ["--server-cmd", "moto_server -H {host} -p {port}", "--health-path", "/",
                   "--config", "a=", "--config", "b="]  # fmt: skip
        fsync = ["?", "?", "?"]
    else:
        servers = []  # the defaults: squall and squall-nofsync
        fsync = ["yes", "no", "yes"]  # the external endpoint is a squall with its defaults
    argv = [sys.executable, "-m", "loadtests.bench", *TINY, *servers, "--markdown",
            "--endpoint", f"external={endpoint}"]  # fmt: skip
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=child_env(), timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:10]]
    assert lines[1].startswith("|---|---:|")
    assert [r[0] for r in rows] == [*TITLES, "PUT fsynced before ack"]
    for row in rows[:-1]:
        assert len(row) == 9  # workload, unit, baseline, then figure + ratio for 3 targets
        assert all(cell[0].isdigit() for cell in row[2:]), row  # no failures, no errors
        assert all(cell.endswith("x") for cell in row[4::2])
    assert rows[-1][2:] == ["yes", fsync[0], "", fsync[1], "", fsync[2], ""]
    assert "external: external endpoint" in proc.stdout


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", "no-equals-sign"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err
    assert main(["--workloads", "put-1TiB-c1"]) == 2
    if shutil.which("warp") is None:
        assert main(["--tool", "warp"]) == 2
        assert "go install github.com/minio/warp" in capsys.readouterr().err


def test_locust_rows() -> None:
    row = LocustWorkload("mixed", 4, 3.4)
    assert (row.key, row.title, row.unit) == ("locust-mixed-u4", "locust mixed x4", "req/s")
    argv = locust_command(
        row, endpoint="http://127.0.0.1:1", csv_prefix=Path("x"), extra=["-L", "ERROR"]
    )
    assert argv[argv.index("-f") + 1].endswith("loadtests/mixed.py")
    assert argv[argv.index("-t") + 1] == "3s"
    assert argv[-2:] == ["-L", "ERROR"]
    m = measurement_from_stats(parse_stats(STATS))
    assert (m.ops, m.errors, m.ops_s) == (11, 1, 4.5)


FAKE_WARP = """#!{python}
import json, sys
with open({log!r}, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
op = sys.argv[1].upper()
if op == "MIXED":
    print("Report: GET. Concurrency: 2. Ran: 1s\\n * Average: 10.00 MiB/s, 640.00 obj/s\\n")
    print("Report: Total. Concurrency: 2. Ran: 1s\\n * Average: 12.00 MiB/s, 1000.00 obj/s")
else:
    print(f"Report: {{op}}. Concurrency: 1. Ran: 1s\\n * Average: 123.40 MiB/s, 5.00 obj/s")
"""


def test_tool_warp_runs_warp_with_the_shapes(endpoint: str, tmp_path: Path) -> None:
    """A stand-in ``warp`` on PATH records its arguments and prints warp's report format."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "warp-calls.jsonl"
    warp = bin_dir / "warp"
    warp.write_text(FAKE_WARP.format(python=sys.executable, log=str(log)))
    warp.chmod(0o755)
    env = {**child_env(), "PATH": f"{bin_dir}:{child_env()['PATH']}"}
    argv = [sys.executable, "-m", "loadtests.bench", *TINY, "--tool", "warp",
            "--workloads", "put-64KiB-c1,mixed-16KiB-c2", "--config", "only=",
            "--endpoint", f"external={endpoint}", "--warp-args=--noclear"]  # fmt: skip
    if server_kind() == "moto":
        argv += ["--server-cmd", "moto_server -H {host} -p {port}", "--health-path", "/"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split("  ") for line in proc.stdout.splitlines()[2:4]]
    cells = [[c.strip() for c in row if c.strip()] for row in rows]
    assert cells[0][:2] == ["PUT 64KiB x1", "MiB/s"] and cells[0][3] == "123"
    assert cells[1][:2] == ["GET/PUT/STAT/DELETE 16KiB x2", "ops/s"] and cells[1][3] == "1000"
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    # each workload on every server before the next; the order turns by one per workload
    assert [c[0] for c in calls] == ["put", "put", "mixed", "mixed"]
    put = calls[0]
    assert put[put.index("--obj.size") + 1] == "64KiB"
    assert put[put.index("--concurrent") + 1] == "1"
    assert put[put.index("--access-key") + 1] == ACCESS_KEY
    assert put[-1] == "--noclear"
    hosts = [c[c.index("--host") + 1] for c in calls]
    external = endpoint.removeprefix("http://")
    assert hosts[0] != external and hosts[1] == external  # put: config, then external
    assert hosts[2] == external and hosts[3] == hosts[0]  # mixed: external first


def test_repeated_runs_keep_the_median() -> None:
    runs = [Measurement(ops=1, rates=(mib, 0.0)) for mib in (30.0, 10.0, 20.0, 40.0)]
    assert median_run(runs, "MiB/s").mib_s == 20.0  # the lower middle of an even count
    assert median_run(runs[:3], "MiB/s").mib_s == 20.0
    assert main(["--repeat", "0"]) == 2
