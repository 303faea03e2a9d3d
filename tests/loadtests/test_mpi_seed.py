"""The MPI seed benchmark's options, statistics and report (no MPI, no store: the report
is computed from the figures of runs given here)."""

from __future__ import annotations

import pytest

from gateway.cost.calibration import CalibrationPoint
from loadtests.bench.mpi_seed import main, parser
from loadtests.bench.mpi_seed_report import Prices, Run, render
from loadtests.bench.mpi_seed_runs import Outcome, Shape
from loadtests.bench.mpi_seed_stats import Spread, cell
from loadtests.mpi.ior import IorModel

SHAPE = Shape(IorModel.parse(4, 4, "8m", "1m"), iterations=400, checkpoints=5)
S_C = SHAPE.model.total_bytes


@pytest.mark.parametrize("value", ["0", "-2", "x"])
def test_repeat_must_be_a_positive_integer(value: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--repeat", value, "--store", "http://127.0.0.1:9"])
    assert exc.value.code == 2
    assert "--repeat" in capsys.readouterr().err


def test_a_bad_io_model_is_a_cli_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--block", "3m", "--transfer", "2m", "--store", "http://127.0.0.1:9"])
    assert exc.value.code == 2
    assert "multiple of the transfer size" in capsys.readouterr().err


def test_default_size_is_larger_checkpoints_more_of_them_repeated() -> None:
    args = parser().parse_args([])
    model = IorModel.parse(args.np, args.segments, args.block, args.transfer)
    assert model.total_bytes == 134_217_728 and args.checkpoints == 5
    assert args.iterations == 400 and args.repeat == 5


def test_spread_is_median_min_max_of_finite_values() -> None:
    assert Spread.of([3.0, 1.0, float("nan"), 2.0]) == Spread(2.0, 1.0, 3.0, 3)
    assert Spread.of([float("nan")]) is None
    assert cell([10.0, 12.0, 11.0], ".1f", suffix=" s") == "11.0 s (10.0-12.0)"
    assert cell([5.0], ".1f") == "5.0"  # one run: no spread
    assert cell([-1.0, 2.0], "+.1f") == "+0.5 (-1.0 to +2.0)"
    assert cell([], ".1f", missing="none") == "none"


def outcome(name: str, completion: float, ckpt: float, *, volumes: int = 6) -> Outcome:
    phases = [("init", ckpt)] + [p for k in range(1, 6)
                                 for p in ((f"compute{k}", 5.0), (f"ckpt{k}", ckpt))]
    gb = 0.14 if name == "adaptive" else 0.0
    out = Outcome(name, completion, phases, restart_s=0.5, cache_gb_s=2.0 if gb else 0.0,
                  volumes=[{"size_bytes": 140_000_000, "attached_at": float(i),
                            "detached_at": i + 3.0, "used_peak_bytes": S_C,
                            "needed_bytes": S_C, "arrival_s": 1.0}
                           for i in range(volumes)] if gb else [])
    rate = S_C / 1e6 / ckpt
    out.points.append(CalibrationPoint(gb, S_C / 1e9, rate, 3.0 if gb else 0.0))
    return out


def run(scale: float, *, adaptive_volumes: int = 6) -> Run:
    outcomes = (outcome("static-slow", 40 * scale, 2.6 * scale),
                outcome("static-fast", 33 * scale, 1.0 * scale),
                outcome("adaptive", 34 * scale, 1.1 * scale, volumes=adaptive_volumes))
    return Run(outcomes, Prices.calibrated(outcomes, backend_size_gb=1.0), 25.0)


def test_report_of_repeated_runs_gives_median_and_spread_of_every_figure() -> None:
    text = render(SHAPE, [run(1.0), run(1.2), run(0.9)], initial_cache_mb=256,
                  inactivity_delay_s=1.0)
    assert "3 run(s)" in text
    assert "| static-slow | 40.0 (36.0-48.0) |" in text  # T: median, min-max
    for table in ("Table I", "Table II", "Table III", "Table IV", "Burst buffer"):
        assert table in text
    # Every row of Tables III and IV has a prediction and states its error.
    prediction_rows = [line for line in text.splitlines()
                       if line.startswith("| ") and line.count("|") == 7
                       and not line.startswith("| approach")]
    assert len(prediction_rows) == 6
    assert all(" %" in row.split("|")[-3] for row in prediction_rows)
    assert "no prediction" not in text
    assert text.count("* run ") == 9


def test_adaptive_is_predicted_when_a_burst_spanned_two_checkpoints() -> None:
    """One volume took two checkpoints (resumed while draining): the prediction uses the
    first volume for the initial dump and the learned one for every checkpoint."""
    text = render(SHAPE, [run(1.0, adaptive_volumes=4)], initial_cache_mb=256,
                  inactivity_delay_s=1.0)
    assert "no prediction" not in text
    assert "1 run(s); every figure is the median of the runs\n" in text


def test_no_run_is_an_error() -> None:
    with pytest.raises(ValueError):
        render(SHAPE, [], initial_cache_mb=256, inactivity_delay_s=1.0)
