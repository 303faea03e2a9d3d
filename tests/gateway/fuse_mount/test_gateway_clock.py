"""The gateway's clock as a mount estimates it from the Date of the responses."""

from __future__ import annotations

import email.utils

import pytest

from gateway.fuse_mount.gateway_clock import SAMPLES, TOLERANCE, GatewayClock

LOCAL = 1_800_000_000.25  # this machine's clock when the responses arrive


def date_at(seconds: float) -> str:
    return email.utils.formatdate(seconds, usegmt=True)


def clock_seeing(offset: float, answers: int = 5) -> GatewayClock:
    clock = GatewayClock(clock=lambda: LOCAL)
    for i in range(answers):
        sent = LOCAL + i * 0.3
        clock.observe(sent, sent + 0.01, date_at(sent + offset))
    return clock


@pytest.mark.parametrize("offset", [0.0, 0.9, -1.4])
def test_a_clock_in_step_is_not_corrected(offset: float) -> None:
    clock = clock_seeing(offset)
    assert clock.offset == 0.0
    assert clock.now() == LOCAL


@pytest.mark.parametrize("offset", [300.0, -90.0, 3.5])
def test_a_clock_off_by_more_than_the_tolerance_is_corrected(offset: float) -> None:
    clock = clock_seeing(offset)
    assert abs(clock.offset - offset) <= 1.0
    assert abs(clock.now() - (LOCAL + offset)) <= 1.0


def test_without_an_answer_the_local_clock_is_used() -> None:
    assert GatewayClock(clock=lambda: LOCAL).now() == LOCAL


@pytest.mark.parametrize("date", [None, "", "not a date", "Thu, 99 Nov 2026 25:61:00 GMT"])
def test_a_missing_or_bad_date_is_ignored(date: str | None) -> None:
    clock = clock_seeing(300.0)
    clock.observe(LOCAL, LOCAL + 0.01, date)
    assert abs(clock.offset - 300.0) <= 1.0


def test_a_slow_answer_is_ignored() -> None:
    clock = GatewayClock(clock=lambda: LOCAL)
    clock.observe(LOCAL, LOCAL + 5.0, date_at(LOCAL + 600))
    clock.observe(LOCAL + 1, LOCAL, date_at(LOCAL + 600))  # the local clock stepped back
    assert clock.offset == 0.0


def test_one_odd_answer_does_not_move_the_estimate() -> None:
    clock = clock_seeing(120.0)
    clock.observe(LOCAL, LOCAL + 0.01, date_at(LOCAL - 3600))
    assert abs(clock.offset - 120.0) <= 1.0


def test_a_gateway_clock_that_is_stepped_is_followed() -> None:
    clock = clock_seeing(0.0, answers=SAMPLES)
    for i in range(SAMPLES // 2 + 1):
        sent = LOCAL + i
        clock.observe(sent, sent + 0.01, date_at(sent + 60))
    assert abs(clock.offset - 60) <= 1.0
    assert TOLERANCE < 60
