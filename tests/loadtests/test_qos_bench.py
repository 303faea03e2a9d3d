"""The G-states benchmark in tiny configurations of both shapes (a few seconds each), to
keep it working."""

from __future__ import annotations

from pathlib import Path

from loadtests.bench.qos import Shape, main, run, table

MB = 1_000_000
MODES = ("g-states", "static", "credit")


def test_tiny_checkpoint_run_reports_three_modes_and_both_bills(tmp_path: Path) -> None:
    shape = Shape(duration_s=1.2, period_s=0.6, burst_writers=2, burst_objects=2,
                  steady_rate=4.0, object_size=32 * 1024, g0_bytes_per_s=64e3, max_gear=2,
                  credit_s=1.0, backend_bytes_per_s=8 * MB, interval_s=0.2)
    results = run(shape, tmp_path / "work", tmp_path / "out")
    assert [(r.mode, r.tenant) for r in results] == [
        (mode, tenant) for mode in MODES for tenant in ("bursty", "steady")]
    assert all(r.latencies for r in results)
    by = {(r.mode, r.tenant): r for r in results}
    for mode in MODES:  # every checkpoint completes
        assert len(by[(mode, "bursty")].checkpoints) == 2
        assert len(by[(mode, "bursty")].latencies) == 2 * 2 * 2
    for tenant in ("bursty", "steady"):  # billed in both modes (how close the two bills
        # come depends on the machine's timing in a run this short: the benchmark's matter)
        assert by[("g-states", tenant)].reserved_mb > 0 and by[("static", tenant)].reserved_mb > 0
    text = table(results, shape)
    assert "| g-states | bursty |" in text and "| credit | steady |" in text
    assert "| static |" in text.split("bill AGBs (both tenants)")[1]
    assert (tmp_path / "out" / "qos-gears.csv").read_text().startswith("mode,t,bursty,steady")


def test_tiny_intensive_run_accounts_for_every_arrival(tmp_path: Path) -> None:
    """Open-loop phases; the credit scheme runs dry in the intensive phase: every
    scheduled PUT is either done or counted unfinished, in every mode."""
    shape = Shape(name="intensive", phases=((0.3, 0.8), (1.0, 4.0), (0.3, 0.8)),
                  steady_rate=4.0, object_size=32 * 1024, g0_bytes_per_s=64e3, max_gear=2,
                  credit_s=0.5, backend_bytes_per_s=8 * MB, interval_s=0.2, drain_s=0.3,
                  max_wait_s=0.5)
    arrivals = shape.arrivals()
    assert arrivals == sorted(arrivals) and 0 < arrivals[-1] < shape.length_s == 1.6
    results = run(shape, tmp_path / "work", tmp_path / "out")
    assert [(r.mode, r.tenant) for r in results] == [
        (mode, tenant) for mode in MODES for tenant in ("phased", "steady")]
    for r in results:
        if r.tenant == "phased":
            assert len(r.latencies) + len(r.unfinished) == len(arrivals), r
        assert r.reserved_mb > 0
    assert "| g-states | phased |" in table(results, shape)
    csv = (tmp_path / "out" / "qos-gears.csv").read_text()
    assert csv.startswith("mode,t,phased,steady")


def test_unknown_shape_is_refused(capsys: object) -> None:
    import pytest

    with pytest.raises(SystemExit) as exit_info:
        main(["--shape", "spiky"])
    assert exit_info.value.code == 2
