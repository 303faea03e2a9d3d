"""Token gates on a scripted clock: waiting, the bound and SlowDown, gear changes."""

from __future__ import annotations

import pytest

from backends.core.errors import SlowDown
from gateway.qos.gate import ClassGate, RateGate, request_bytes


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_debt_is_repaid_at_the_rate() -> None:
    clock = Clock()
    gate = RateGate(1000.0, 0.1, clock)  # 100 tokens of burst
    assert gate.take(100) == 0.0
    assert gate.take(500) == pytest.approx(0.5)
    assert gate.wait_for(0) == pytest.approx(0.5)
    clock.now += 0.5
    assert gate.wait_for(0) == 0.0
    assert gate.charged == 600


def test_a_faster_gear_repays_sooner() -> None:
    clock = Clock()
    gate = RateGate(1000.0, 0.1, clock)
    gate.take(1100)  # 1000 tokens of debt
    gate.set_rate(2000.0)
    assert gate.wait_for(0) == pytest.approx(0.5)


def test_bounded_reservation_refuses_with_retry_after() -> None:
    clock = Clock()
    gate = ClassGate(1000.0, None, burst_s=0.1, max_wait_s=1.0, clock=clock)
    assert gate.reserve(1100) == pytest.approx(1.0)  # within the bound: waits
    with pytest.raises(SlowDown) as refused:
        gate.reserve(1000)
    assert refused.value.retry_after == 1
    assert gate.refused == 1 and gate.bandwidth.charged == 1100  # refused: nothing taken
    assert gate.reserve(5000, bounded=False) == pytest.approx(6.0)  # flushes never refused


def test_iops_cap() -> None:
    clock = Clock()
    gate = ClassGate(1e9, 10.0, burst_s=0.1, max_wait_s=0.5, clock=clock)
    waits = [gate.reserve(0) for _ in range(6)]
    assert waits[0] == 0 and waits[-1] == pytest.approx(0.5)
    with pytest.raises(SlowDown):
        gate.reserve(0)


def test_request_bytes() -> None:
    assert request_bytes({"content-length": "42"}) == 42
    assert request_bytes({"content-length": "99", "x-amz-decoded-content-length": "64"}) == 64
    assert request_bytes({"transfer-encoding": "chunked"}) == 0
    assert request_bytes({"content-length": "-1"}) == 0


def test_backlog_is_what_waits() -> None:
    clock = Clock()
    gate = ClassGate(1000.0, 10.0, burst_s=0.1, max_wait_s=5.0, clock=clock)
    gate.reserve(600)
    assert gate.backlog() == (pytest.approx(500), pytest.approx(0))
    clock.now += 0.2
    assert gate.backlog()[0] == pytest.approx(300)
    clock.now += 1.0
    assert gate.backlog() == (0.0, 0.0)


def test_credit_buckets_burst_then_fall_back_to_the_baseline() -> None:
    clock = Clock()
    # Peak 4000 B/s, baseline 1000 B/s, 2 s of baseline in credits (2000 B).
    gate = ClassGate(4000.0, None, burst_s=0.1, max_wait_s=5.0, clock=clock,
                     credit=(1000.0, None, 2.0))
    assert gate.reserve(2000) == pytest.approx(1600 / 4000)  # at the peak
    assert gate.reserve(1000) == pytest.approx(1.0)  # credits spent: the baseline
    with pytest.raises(SlowDown):
        gate.reserve(5000)  # refused: 6 s at the baseline
    assert gate.refused_bytes == 5000
    clock.now += 10.0  # idle: credits refill up to their cap, never beyond
    assert gate.credit_bandwidth is not None
    assert gate.credit_bandwidth.level() == pytest.approx(2000)


def test_a_promotion_shortens_a_wait_under_way() -> None:
    clock = Clock()
    gate = RateGate(1000.0, 0.1, clock)
    gate.take(100)
    ticket_wait = gate.take(1000)  # waits 1 s at 1000 B/s
    ticket = gate.charged
    assert ticket_wait == pytest.approx(1.0) == gate.remaining(ticket)
    clock.now += 0.5
    gate.set_rate(2000.0)  # promoted half-way: 500 B left at 2000 B/s
    assert gate.remaining(ticket) == pytest.approx(0.25)
    gate.take(5000)  # later reservations queue behind, not in front
    assert gate.remaining(ticket) == pytest.approx(0.25)
