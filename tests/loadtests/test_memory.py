"""The memory benchmark runs end to end on a tiny object."""

from __future__ import annotations

from pathlib import Path

from loadtests.bench.memory import measure


def test_memory_measure_reports_rss(tmp_path: Path) -> None:
    before, peak = measure("tiny", ["--cache-size", "0"], 3 * 1024 * 1024 + 5, tmp_path)
    assert 0 < before <= peak
