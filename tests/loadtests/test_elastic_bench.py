"""The seed-reproduction benchmark: its schedule, its tables, and one tiny real run."""

from __future__ import annotations

from pathlib import Path

from gateway.cost.predict import Prediction
from loadtests.bench.checkpoint_app import AppRun, AppShape
from loadtests.bench.elastic import Outcome, Setup, main, tables

MiB = 1 << 20
SHAPE = AppShape(writers=4, init_bytes=128 * MiB, checkpoint_bytes=96 * MiB, checkpoints=3,
                 iterations=30, iteration_s=2.0, object_size=8 * MiB)


def test_schedule_follows_the_controller_rule() -> None:
    setup = Setup(SHAPE, slow=16e6, fast=64e6, initial_cache=256 * MiB,
                  inactivity_delay_s=1.0, backend_size_gb=1.25)
    # what the previous burst used (16 or 12 files of header + payload), rounded up
    assert setup.schedule() == [129 * MiB, 97 * MiB, 97 * MiB]
    assert setup.args("adaptive")[:2] == ["--cache-mode", "elastic"]
    assert "--cache-size" in setup.args("static-slow")


def test_tables() -> None:
    def outcome(name: str, t: float, cost: float, pt: float | None = None) -> Outcome:
        pred = None if pt is None else Prediction(name, 0, 1, 0, pt - 1, 0, cost * 1.05,
                                                  init_time_s=1.0)
        return Outcome(name, AppRun(t, 0.0, []), cost, pred, [])

    text = tables([outcome("static-slow", 120, 300, 118), outcome("static-fast", 100, 1000),
                   outcome("adaptive", 101, 290, 101)])
    assert "| static-slow | 120.0 | +20.0 % |" in text
    assert "| adaptive | 101.0 | +1.0 % |" in text
    assert "| adaptive | 290 | 29.0 % |" in text
    assert "| static-slow | 118.0 | 120.0 | 0.9833 |" in text
    assert "| adaptive | 304.5 | 290.0 | 1.0500 |" in text


def test_tiny_adaptive_run(tmp_path: Path, capsys: object) -> None:
    code = main(["--only", "adaptive", "--no-calibration", "--writers", "2", "--init", "2MiB",
                 "--checkpoint", "1MiB", "--object-size", "1MiB", "--checkpoints", "1",
                 "--iterations", "1", "--iteration-time", "0.2", "--slow", "4MB/s",
                 "--fast", "32MB/s", "--initial-cache", "4MiB", "--inactivity-delay", "0.3",
                 "--out", str(tmp_path)])
    assert code == 0
    assert (tmp_path / "adaptive.csv").read_text().startswith("elapsed_s,")
