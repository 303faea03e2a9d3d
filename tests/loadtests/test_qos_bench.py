"""The G-states benchmark in a tiny configuration (a few seconds), to keep it working."""

from __future__ import annotations

from pathlib import Path

from loadtests.bench.qos import Shape, run, table

MB = 1_000_000


def test_tiny_run_reports_three_modes_and_the_same_bill(tmp_path: Path) -> None:
    shape = Shape(duration_s=2.0, period_s=1.0, burst_writers=2, burst_objects=2,
                  steady_rate=4.0, object_size=32 * 1024, g0_bytes_per_s=64e3, max_gear=2,
                  credit_s=1.0, backend_bytes_per_s=8 * MB, interval_s=0.2)
    results = run(shape, tmp_path / "work", tmp_path / "out")
    assert [(r.mode, r.tenant) for r in results] == [
        (mode, tenant) for mode in ("g-states", "static", "credit")
        for tenant in ("bursty", "steady")]
    assert all(r.latencies for r in results)
    by = {(r.mode, r.tenant): r for r in results}
    for mode in ("g-states", "static", "credit"):  # every checkpoint completes
        assert len(by[(mode, "bursty")].checkpoints) == 2
        assert len(by[(mode, "bursty")].latencies) == 2 * 2 * 2
    for tenant in ("bursty", "steady"):  # the static cap is sized for the same bill
        g, s = by[("g-states", tenant)].reserved_mb, by[("static", tenant)].reserved_mb
        assert abs(g - s) <= 0.35 * g, (tenant, g, s)
    text = table(results, shape)
    assert "| g-states | bursty |" in text and "| credit | steady |" in text
    assert "| static |" in text.split("bill AGBs (both tenants)")[1]
    assert (tmp_path / "out" / "qos-gears.csv").read_text().startswith("mode,t,bursty,steady")
