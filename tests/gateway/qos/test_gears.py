"""The tuning decision on scripted traces (seed Algorithm 3), without a clock."""

from __future__ import annotations

from gateway.qos.gears import GearState, Tuning
from gateway.qos.model import QosClass

MB = 1_000_000


def state(**kw: object) -> GearState:
    return GearState(QosClass.model_validate({"g0_bandwidth": "10MB/s", **kw}))


def test_promotes_at_the_threshold_and_doubles_the_cap() -> None:
    s = state(max_gear=2)
    assert s.tick(1.0, 9.4 * MB, 0, 0.0) is Tuning.HOLD  # below 95% of 10 MB/s
    assert s.tick(1.0, 9.5 * MB, 0, 0.0) is Tuning.PROMOTE
    assert (s.gear, s.bandwidth_cap) == (1, 20 * MB)
    assert s.tick(1.0, 19.9 * MB, 0, 0.0) is Tuning.PROMOTE
    assert s.tick(1.0, 40 * MB, 0, 0.0) is Tuning.HOLD  # the top gear
    assert (s.gear, s.bandwidth_cap) == (2, 40 * MB)


def test_iops_alone_promotes() -> None:
    s = state(g0_iops=100)
    assert s.tick(1.0, 0, 96, 0.0) is Tuning.PROMOTE
    assert s.iops_cap == 200


def test_device_utilization_vetoes_promotion() -> None:
    s = state(device_threshold=0.8)
    assert s.tick(1.0, 10 * MB, 0, 0.85) is Tuning.VETOED
    assert s.gear == 0
    assert s.tick(1.0, 10 * MB, 0, 0.5) is Tuning.PROMOTE


def test_demotes_below_the_lower_gear_after_the_hysteresis() -> None:
    s = state(demote_after=3)
    for _ in range(3):
        s.tick(1.0, 10 * MB * 2 ** s.gear, 0, 0.0)
    assert s.gear == 3
    # 15 MB/s: below gear 2's cap (40) and gear 1's (20) but not gear 0's (10).
    trace = [s.tick(1.0, 15 * MB, 0, 0.0) for _ in range(7)]
    assert trace == [Tuning.HOLD, Tuning.HOLD, Tuning.DEMOTE,
                     Tuning.HOLD, Tuning.HOLD, Tuning.DEMOTE, Tuning.HOLD]
    assert s.gear == 1


def test_a_busy_interval_resets_the_hysteresis() -> None:
    s = state(demote_after=2)
    s.tick(1.0, 10 * MB, 0, 0.0)
    assert s.gear == 1
    assert s.tick(1.0, 1 * MB, 0, 0.0) is Tuning.HOLD
    assert s.tick(1.0, 12 * MB, 0, 0.0) is Tuning.HOLD  # between the two caps: resets
    assert s.tick(1.0, 1 * MB, 0, 0.0) is Tuning.HOLD
    assert s.tick(1.0, 1 * MB, 0, 0.0) is Tuning.DEMOTE


def test_demote_after_one_is_the_seed_rule() -> None:
    s = state(demote_after=1)
    s.tick(1.0, 10 * MB, 0, 0.0)
    assert s.tick(1.0, 9.9 * MB, 0, 0.0) is Tuning.DEMOTE


def test_static_class_never_moves() -> None:
    s = state(max_gear=0)
    assert s.tick(1.0, 100 * MB, 0, 0.0) is Tuning.HOLD
    assert s.gear == 0


def test_billing_per_gear_second() -> None:
    s = state(max_gear=2, demote_after=1)
    trace = [(1.0, 0), (1.0, 10), (1.0, 20), (1.0, 39), (1.0, 39), (1.0, 0), (0.5, 0)]
    for dt, used in trace:
        s.tick(dt, used * MB, 0, 0.0)
    # gears held during the intervals: 0, 0, 1, 2, 2, 2, 1
    assert s.seconds_at_gear == [2.0, 1.5, 3.0]
    assert s.gear_seconds == 2 * 1 + 1 * 2 + 3 * 4 + 0.5 * 2
    assert s.reserved_mb == 10 * s.gear_seconds  # G0 = 10 MB/s


def test_share_divides_every_cap() -> None:
    s = GearState(QosClass(g0_bandwidth=10 * MB, g0_iops=100), share=0.5)
    assert (s.bandwidth_cap, s.iops_cap) == (5 * MB, 50)
    assert s.tick(1.0, 4.8 * MB, 0, 0.0) is Tuning.PROMOTE
    assert s.reserved_mb == 5.0


def test_respec_keeps_the_bill_and_clamps_the_gear() -> None:
    s = state(max_gear=3)
    for _ in range(3):
        s.tick(1.0, 10 * MB * 2 ** s.gear, 0, 0.0)
    billed = s.gear_seconds
    s.respec(QosClass(g0_bandwidth=10 * MB, max_gear=1))
    assert s.gear == 1 and s.gear_seconds == billed


def test_default_demotion_is_the_seed_rule() -> None:
    s = state()
    assert s.spec.demote_after == 1
    s.tick(1.0, 10 * MB, 0, 0.0)
    s.tick(1.0, 20 * MB, 0, 0.0)
    assert [s.tick(1.0, 0, 0, 0.0) for _ in range(3)] == [
        Tuning.DEMOTE, Tuning.DEMOTE, Tuning.HOLD]


def test_credit_class_has_no_gears_and_bills_g0() -> None:
    s = state(credit_s=30, max_gear=3)
    assert s.tick(1.0, 100 * MB, 0, 0.0) is Tuning.HOLD
    assert s.gear == 0 and s.gear_seconds == 1.0
    assert s.gate_caps() == (80 * MB, None)  # the peak: the top gear's cap
    assert s.credit() == (10 * MB, None, 30)
