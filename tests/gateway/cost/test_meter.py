"""CostMeter: accumulation with a fake clock, series, CSV, report, metrics, lifespan."""

from __future__ import annotations

import asyncio
import csv
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from gateway.cost import plot
from gateway.cost.meter import CostMeter, CostSample, sample_from_status

GB = 1_000_000_000


class Script:
    """A fake clock and cache that replay fixed values, one per sample."""

    def __init__(self, times: list[float], sizes: list[int]) -> None:
        self._times: Iterator[float] = iter(times)
        self._sizes: Iterator[int] = iter(sizes)

    def clock(self) -> float:
        return next(self._times)

    def sample(self) -> CostSample:
        size = next(self._sizes)
        return CostSample(cache_size_bytes=size, cache_used_bytes=size // 2,
                          dirty_bytes=size // 4, ingest_rate_bytes_per_s=1e6)


def make(times: list[float], sizes: list[int], **kw: float) -> CostMeter:
    script = Script(times, sizes)
    kw.setdefault("interval_s", 5.0)
    return CostMeter(script.sample, backend_bandwidth_mb_s=33,
                     backend_size_gb=50, cache_bandwidth_mb_s=128,
                     clock=script.clock, **kw)  # type: ignore[arg-type]


def test_accumulates_the_seed_formula_over_nodes() -> None:
    meter = make([1000.0, 1005.0, 1010.0], [0, 10 * GB, 10 * GB], nodes=2)
    assert meter.cost_agbs() == 0.0
    meter.sample_once()
    assert meter.cost_agbs() == 0.0  # one sample: no time has passed
    meter.sample_once()
    meter.sample_once()
    # per node: 33*50*10 + 128*(25 + 50) = 26100; two nodes
    assert meter.cost_agbs() == 52200.0
    assert meter.backend_agbs() == 33000.0
    assert meter.cache_agbs() == 19200.0
    assert [p.elapsed_s for p in meter.points()] == [0.0, 5.0, 10.0]
    assert [p.cost_agbs for p in meter.points()] == [0.0, 2 * (8250 + 3200), 52200.0]


def test_clock_stepping_back_adds_nothing() -> None:
    meter = make([100.0, 90.0], [GB, GB])
    meter.sample_once()
    meter.sample_once()
    assert meter.cost_agbs() == 0.0


def test_series_is_bounded_but_the_total_is_not() -> None:
    times = [float(5 * i) for i in range(10)]
    meter = make(times, [GB] * 10, retention_s=10.0)  # keeps 3 points
    for _ in range(10):
        meter.sample_once()
    assert len(meter.points()) == 3
    assert meter.cost_agbs() == 33 * 50 * 45 + 128 * 1 * 45


def test_status_csv_and_report(tmp_path: Path) -> None:
    meter = make([0.0, 5.0], [0, 10 * GB])
    meter.sample_once()
    meter.sample_once()
    status = meter.status()
    assert status["agbs"] == 33 * 50 * 5 + 128 * 25
    assert status["unit"] == "AGBs" and status["samples"] == 2
    assert status["series"]["cache_size_bytes"] == [0, 10 * GB]
    path = tmp_path / "cost.csv"
    meter.to_csv(path)
    rows = list(csv.reader(path.open()))
    assert rows[0][0] == "elapsed_s" and rows[0][-1] == "cost_agbs"
    assert [float(r[-1]) for r in rows[1:]] == [0.0, 11450.0]
    report = meter.report()
    assert "11,450.0 AGBs" in report and "N=50 GB" in report


def test_metrics_read_the_meter() -> None:
    registry = CollectorRegistry()
    meter = make([0.0, 10.0], [0, 0])
    meter.register_metrics(registry)
    meter.sample_once()
    meter.sample_once()
    assert registry.get_sample_value("squall_cost_agbs") == 16500.0
    assert registry.get_sample_value("squall_cost_cache_agbs") == 0.0


def test_sample_from_cache_status() -> None:
    sample = sample_from_status({"cache_capacity_bytes": 7, "cache_used_bytes": 3,
                                 "dirty_bytes": 2, "ingest_rate_bytes_per_s": 1.5,
                                 "flush_phase": "idle"})
    assert sample == CostSample(7, 3, 2, 1.5)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="nodes"):
        make([], [], nodes=0)
    with pytest.raises(ValueError, match="interval"):
        CostMeter(lambda: CostSample(0), interval_s=0, backend_bandwidth_mb_s=1,
                  backend_size_gb=1, cache_bandwidth_mb_s=1)


async def test_start_and_stop_with_the_lifespan() -> None:
    meter = make([0.0, 5.0, 6.0], [GB, GB, GB], interval_s=3600.0)
    await meter.start()
    await asyncio.sleep(0)  # the task takes its first sample, then sleeps
    await meter.stop()  # cancels it and takes a closing sample
    assert len(meter.points()) == 2
    await meter.stop()  # idempotent


async def test_a_failing_probe_does_not_stop_the_meter() -> None:
    calls = 0

    def probe() -> CostSample:
        nonlocal calls
        calls += 1
        raise OSError("gone")

    meter = CostMeter(probe, backend_bandwidth_mb_s=1, backend_size_gb=1,
                      cache_bandwidth_mb_s=1, interval_s=3600.0)
    await meter.start()
    await asyncio.sleep(0)
    await meter.stop()
    assert calls == 2 and meter.cost_agbs() == 0.0


def test_plot_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    meter = make([0.0, 5.0, 10.0], [0, GB, GB])
    for _ in range(3):
        meter.sample_once()
    path = tmp_path / "cost.png"
    plot.plot_series(meter.status()["series"], path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(plot.PlotUnavailable, match=r"pip install 'squall\[plot\]'"):
        plot.plot_series({}, tmp_path / "x.png")
