"""The slow-client rules of gateway/http/pace.py on a clock the tests move."""

from __future__ import annotations

from gateway.http.pace import BodyPace, PaceLimits, StallMeter, Verdict

LIMITS = PaceLimits(min_rate=1000.0, grace_s=10.0, deadline_s=100.0, deadline_rate=100.0)


def test_the_grace_period_is_free_then_every_window_needs_the_minimum_rate() -> None:
    pace = BodyPace(LIMITS, start=0.0, declared=1_000_000)
    assert pace.check(5.0, 0, 0.0) == (Verdict.OK, 5.0)  # next look: the grace's end
    assert pace.check(10.0, 0, 0.0)[0] is Verdict.OK  # the first window opens
    assert pace.check(20.0, 10_000, 0.0)[0] is Verdict.OK  # 1000 B/s: just enough
    assert pace.check(30.0, 19_000, 0.0)[0] is Verdict.TOO_SLOW


def test_time_the_server_did_not_read_is_not_the_clients() -> None:
    pace = BodyPace(LIMITS, start=0.0, declared=1_000_000)
    pace.check(10.0, 0, 0.0)
    # 100 s passed, 95 of them with reading paused: 5 s of client time, 5000 bytes
    assert pace.check(110.0, 5000, 95.0)[0] is Verdict.OK


def test_the_deadline_grows_with_the_declared_length() -> None:
    limits = PaceLimits(min_rate=None, grace_s=10.0, deadline_s=100.0, deadline_rate=100.0)
    pace = BodyPace(limits, start=0.0, declared=10_000)  # 100 s + 100 s
    assert pace.check(150.0, 5000, 0.0) == (Verdict.OK, 50.0)
    assert pace.check(200.5, 9000, 0.0)[0] is Verdict.TOO_LATE
    chunked = BodyPace(limits, start=0.0, declared=0)  # unknown: what came so far
    assert chunked.check(150.0, 10_000, 0.0)[0] is Verdict.OK
    assert chunked.check(150.0, 1_000, 0.0)[0] is Verdict.TOO_LATE


def test_rules_turned_off_never_fire() -> None:
    off = PaceLimits(min_rate=None, grace_s=10.0, deadline_s=None, deadline_rate=None)
    pace = BodyPace(off, start=0.0, declared=10)
    assert pace.check(1e6, 0, 0.0)[0] is Verdict.OK
    assert not off.enabled


def test_a_response_taken_too_slowly_while_writes_wait() -> None:
    meter = StallMeter(LIMITS)
    meter.block(0.0)
    assert meter.check(5.0, pending=0) == (False, 5.0)
    assert meter.check(10.0, pending=500)[0]  # 500 bytes in 10 s of waiting


def test_short_waits_add_up_and_a_fast_reader_passes() -> None:
    meter = StallMeter(LIMITS)
    for start in range(0, 20, 2):  # ten waits of 1 s, 50 KB taken in each
        meter.block(float(start))
        meter.unblock(start + 1.0, 50_000)
    meter.block(20.0)
    slow, due = meter.check(20.0, pending=0)
    assert not slow and due == LIMITS.grace_s  # a new window
    slow_meter = StallMeter(LIMITS)
    for start in range(0, 20, 2):  # ten waits of 1 s, 100 bytes in each
        slow_meter.block(float(start))
        slow_meter.unblock(start + 1.0, 100)
    slow_meter.block(20.0)
    assert slow_meter.check(20.0, pending=0)[0]
