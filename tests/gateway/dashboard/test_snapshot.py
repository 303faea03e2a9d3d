"""Rates of the dashboard document: measured over windows, whoever polls."""

from __future__ import annotations

from gateway.dashboard.snapshot import RateMeter


def counters(ingest: int, flush: int = 0, around: int = 0) -> dict[str, int]:
    return {"ingest_bytes_total": ingest, "flush_bytes_total": flush,
            "writearound_bytes_total": around}


def test_rates_need_two_samples_a_window_apart() -> None:
    now = [100.0]
    meter = RateMeter(window_s=1.0, clock=lambda: now[0])
    assert meter.update(counters(0)) == dict.fromkeys(
        ("ingest_bytes_per_s", "flush_bytes_per_s", "writearound_bytes_per_s"))
    now[0] = 100.4  # a second viewer polls early: the window has not passed
    assert meter.update(counters(400))["ingest_bytes_per_s"] is None
    now[0] = 102.0
    assert meter.update(counters(2000, flush=1000, around=200)) == {
        "ingest_bytes_per_s": 1000.0, "flush_bytes_per_s": 500.0,
        "writearound_bytes_per_s": 100.0}
    now[0] = 102.5  # within the next window: the last rates again
    assert meter.update(counters(9999))["ingest_bytes_per_s"] == 1000.0
    now[0] = 103.0
    assert meter.update(counters(2000, flush=1000, around=200))["flush_bytes_per_s"] == 0.0
