"""The checkpoint-burst benchmark: its table and one tiny real run."""

from __future__ import annotations

from pathlib import Path

from loadtests.bench.burst import BurstResult, measure, table


def test_table_ratios() -> None:
    rows = table([BurstResult("static-fast", 2.0, 0.0, 2 * 2**20),
                  BurstResult("adaptive", 2.2, 5.0, 2 * 2**20)], baseline="static-fast")
    assert "| adaptive | 2.20 | 1 | 7.20 | 1.10x |" in rows
    assert "| static-fast | 2.00 | 1 | 2.00 | 1.00x |" in rows


def test_tiny_burst_through_the_cache_drains(tmp_path: Path) -> None:
    result = measure("adaptive", ["--cache-size", "64MiB", "--backend-bandwidth", "8MiB/s"],
                     clients=2, size=256 * 1024, work=tmp_path)
    assert result.total_bytes == 512 * 1024
    assert result.burst_s > 0 and result.drain_s >= 0
