"""The burst-beyond-the-cache benchmark: its table, and one tiny real run of every shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtests.bench.overflow import Row, main, table


def test_table_gives_medians_spreads_and_ratios_to_the_baseline() -> None:
    row = Row("burst", "cache-size-0")
    for cached, nocache in ((300.0, 200.0), (100.0, 210.0), (280.0, 190.0)):
        row.add("default", cached)
        row.add("cache-size-0", nocache)
    text = table([row])
    assert "| burst | default | 280 | 100-300 | 1.40x |" in text
    assert "| burst | cache-size-0 | 200 | 190-210 | 1.00x |" in text


def test_a_tiny_run_of_every_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--cache", "12MiB", "--burst", "40MiB", "--size", "10MiB",
                 "--part-size", "5MiB", "--clients", "2", "--slow-store", "64MiB/s",
                 "--n1-checkpoints", "2", "--n1-ranks", "2", "--n1-parts", "1",
                 "--n1-part-size", "5MiB", "--n1-compute", "0.1", "--repeat", "1",
                 "--work", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for shape, configs in (("burst", ("default", "cache-size-0")),
                           ("burst-slow", ("default", "cache-size-0")),
                           ("n1", ("elastic", "cache-size-0"))):
        for config in configs:
            assert f"| {shape} | {config} |" in out
