"""The mirrored write-back benchmark, on a tiny run: one table, R=1 and R=2, no errors."""

from __future__ import annotations

import pytest

from loadtests.bench.mirror import main


def test_tiny_run_prints_both_replica_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--members", "2", "--sizes", "4KiB", "--clients", "2", "--count", "20",
                 "--duration", "1s"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "PUT" in line
            and "workload" not in line]
    assert [row.split("|")[1].strip() for row in rows] == ["1", "1", "2", "2"]
    assert all(row.rstrip(" |").endswith("| 0") for row in rows), out
