"""Each Locust scenario, headless for a few seconds against a real server: zero failures."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from loadtests.bench.server import free_port
from loadtests.locust_csv import LocustStats, read_stats
from tests.loadtests.conftest import StartServer, child_env

SCENARIOS = Path(__file__).resolve().parents[2] / "loadtests"


def locust(
    scenario: str, host: str, out: Path, *args: str, seconds: int = 5, users: int = 4
) -> tuple[subprocess.CompletedProcess[str], LocustStats]:
    argv = [
        sys.executable, "-m", "locust", "-f", str(SCENARIOS / f"{scenario}.py"),
        "--headless", "--only-summary", "--host", host,
        "-u", str(users), "-r", str(users), "-t", f"{seconds}s", "--csv", str(out), *args,
    ]  # fmt: skip
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=child_env(), timeout=120, check=False
    )
    return proc, read_stats(out)


def assert_clean(proc: subprocess.CompletedProcess[str], stats: LocustStats) -> None:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert stats.failures == 0
    assert stats.total is not None and stats.total.requests > 0


def names(stats: LocustStats, type_: str) -> set[str]:
    return {r.name for r in stats.rows if r.type == type_ and r.requests > 0}


def test_mixed(endpoint: str, tmp_path: Path) -> None:
    proc, stats = locust(
        "mixed", endpoint, tmp_path / "mixed", "--mixed-sizes", "1KiB:5,64KiB:3,1MiB:1"
    )
    assert_clean(proc, stats)
    assert {"CreateBucket", "PutObject", "GetObject", "HeadObject", "ListObjectsV2",
            "DeleteObject"} <= stats.names  # fmt: skip
    assert stats.row("PutObject").average_size > 0  # bytes sent are reported as the size
    assert stats.row("GetObject").average_size > 0


def test_metadata_storms_stop_by_themselves(endpoint: str, tmp_path: Path) -> None:
    proc, stats = locust(
        "metadata", endpoint, tmp_path / "meta", "--meta-files", "25", "--meta-storms", "2",
        seconds=60, users=2,
    )  # fmt: skip
    assert_clean(proc, stats)
    assert "every user finished its work" in proc.stderr
    assert stats.row("PutObject").requests == 2 * 2 * 25
    assert stats.row("HeadObject").requests == 2 * 2 * 25
    assert stats.row("DeleteObject").requests == 2 * 2 * 25
    assert names(stats, "PHASE") == {"create 25", "stat 25", "list 25", "delete 25"}
    assert stats.row("list-after-delete", "CHECK").requests == 4


def test_checkpoint_bursts(endpoint: str, tmp_path: Path) -> None:
    proc, stats = locust(
        "checkpoint", endpoint, tmp_path / "ckpt",
        "--ckpt-size", "256KiB", "--ckpt-phases", "3", "--ckpt-compute", "0.2s",
        seconds=60, users=3,
    )  # fmt: skip
    assert_clean(proc, stats)
    assert stats.row("PutObject checkpoint").requests == 3 * 3
    for phase in (1, 2, 3):
        burst = stats.row(f"checkpoint phase {phase}", "BURST")
        assert burst.requests == 1
        assert burst.average_size == 3 * 256 * 1024
    table = proc.stdout[proc.stdout.index("Checkpoint bursts") :]
    assert [line.split()[:3] for line in table.splitlines()[2:5]] == [
        [str(p), "3", "768KiB"] for p in (1, 2, 3)
    ]


def test_checkpoint_barrier_across_workers(endpoint: str, tmp_path: Path) -> None:
    """Distributed mode: the barrier and the burst table span a master and two workers."""
    port = free_port()
    scenario = str(SCENARIOS / "checkpoint.py")
    master = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", scenario, "--master", "--headless",
         "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
         "--expect-workers", "2", "--host", endpoint, "-u", "4", "-r", "4", "-t", "60s",
         "--only-summary", "--csv", str(tmp_path / "dist"),
         "--ckpt-size", "64KiB", "--ckpt-phases", "2", "--ckpt-compute", "0.2s"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(),
    )  # fmt: skip
    worker = [sys.executable, "-m", "locust", "-f", scenario, "--worker",
              "--master-host", "127.0.0.1", "--master-port", str(port)]  # fmt: skip
    workers = [
        subprocess.Popen(
            worker, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env()
        )
        for _ in range(2)
    ]
    procs: list[subprocess.Popen[str] | subprocess.Popen[bytes]] = [master, *workers]
    try:
        out, _ = master.communicate(timeout=90)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    assert master.returncode == 0, out[-3000:]
    table = out[out.index("Checkpoint bursts") :].splitlines()
    assert [line.split()[:3] for line in table[2:4]] == [["1", "4", "256KiB"], ["2", "4", "256KiB"]]
    assert read_stats(tmp_path / "dist").row("PutObject checkpoint").requests == 8


def test_consistency(endpoint: str, tmp_path: Path) -> None:
    proc, stats = locust(
        "consistency", endpoint, tmp_path / "cons",
        "--hosts", f"{endpoint},{endpoint}", "--cons-delete-ratio", "0.5",
    )  # fmt: skip
    assert_clean(proc, stats)
    assert names(stats, "CHECK") == {
        "read-after-write", "list-after-write", "read-after-delete", "list-after-delete"
    }  # fmt: skip


def test_consistency_counts_stale_reads(start_server: StartServer, tmp_path: Path) -> None:
    """Two unrelated servers: what is written at one is never readable at the other."""
    first, second = start_server().endpoint, start_server().endpoint
    proc, stats = locust(
        "consistency", first, tmp_path / "stale", "--hosts", f"{first},{second}", seconds=4
    )
    assert proc.returncode == 1
    checks = stats.row("read-after-write", "CHECK")
    assert checks.requests > 0 and checks.failures > 0
    assert stats.row("list-after-write", "CHECK").failures > 0


@pytest.mark.parametrize("scenario", ["mixed", "consistency"])
def test_scenario_refuses_missing_credentials(scenario: str, tmp_path: Path) -> None:
    env = {k: v for k, v in child_env().items() if not k.startswith(("SQUALL_", "AWS_"))}
    argv: Sequence[str] = [
        sys.executable, "-m", "locust", "-f", str(SCENARIOS / f"{scenario}.py"), "--headless",
        "--host", "http://127.0.0.1:9", "-u", "1", "-r", "1", "-t", "1s",
    ]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode != 0
    assert "SQUALL_ACCESS_KEY" in proc.stderr
