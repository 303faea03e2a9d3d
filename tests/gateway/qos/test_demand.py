"""The demand measurement on scripted traces: arrivals over a window, saturation of the
gate, the queue; a steady load of large objects settles on one gear."""

from __future__ import annotations

import random

import pytest

from gateway.qos.controller import QosController
from gateway.qos.demand import DemandMeter, sample
from gateway.qos.gate import ClassGate
from gateway.qos.gears import Tuning
from gateway.qos.model import QosSettings

MB = 1_000_000
OBJECT = 256 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def controller(clock: Clock, **settings: object) -> QosController:
    config = QosSettings.model_validate({**settings, "buckets": {"b": {
        "g0_bandwidth": 0.5 * MB, "max_gear": 3}}})
    c = QosController(config, clock=clock)
    c.tick(clock.now)
    return c


def replay(c: QosController, clock: Clock, arrivals: list[float], until: float,
           interval: float) -> list[int]:
    """PUT one object at each arrival time, tick every ``interval``; the gears after
    every tick."""
    gears, pending, tick = [], sorted(arrivals), interval
    while tick <= until + 1e-9:
        while pending and pending[0] < tick:
            clock.now = pending.pop(0)
            c.gates["b"].reserve(OBJECT, bounded=False)
        clock.now = tick
        c.tick(clock.now)
        gears.append(c.states["b"].gear)
        tick += interval
    return gears


@pytest.mark.parametrize("interval", [1.0, 0.5])
def test_steady_large_objects_settle_on_one_gear(interval: float) -> None:
    """3 PUTs/s of 256 KiB (0.79 MB/s against G0 = 0.5 MB/s) with arrival jitter: the
    class climbs to gear 1 (1 MB/s) and stays there; per interval the load reads 1 to 4
    objects (0.26 to 1.05 MB/s), which used to swing it between gears 1 and 2; over the
    3 s window it reads 0.70 to 0.87 MB/s, inside gear 1's band (0.5 to 0.95 MB/s)."""
    rng = random.Random(7)
    arrivals = [k / 3 + rng.uniform(0.0, 0.15) for k in range(3 * 60)]
    clock = Clock()
    c = controller(clock, interval=interval)
    gears = replay(c, clock, arrivals, until=60.0, interval=interval)
    # At the onset the gate drains what queued at gear 0 at gear 1's full cap: one
    # interval at gear 2; then gear 1 for good.
    assert gears[:3] == [1, 2, 1]
    assert set(gears[int(5 / interval):]) == {1}, gears
    assert c.states["b"].seconds_at_gear[2:] == [interval, 0.0]


def test_arrivals_are_averaged_over_the_window() -> None:
    clock = Clock()
    gate = ClassGate(10 * MB, None, burst_s=1.0, max_wait_s=5.0, clock=clock)
    meter = DemandMeter(sample(gate, 0.0), window_s=3.0)
    readings = []
    for second, objects in enumerate([3, 4, 2, 3, 0, 0, 0], start=1):
        for _ in range(objects):
            gate.reserve(OBJECT)
        clock.now = float(second)
        readings.append(meter.update(sample(gate, clock.now), 10 * MB, None))
    demand = [round(r.bandwidth_demand / OBJECT, 3) for r in readings]
    # objects per second over the last 3 s (over what there is for the first two)
    assert demand == [3.0, 3.5, 3.0, 3.0, 1.667, 1.0, 0.0]
    assert readings[1].bandwidth == 4 * OBJECT  # admitted in the interval itself


def test_a_throttled_closed_loop_client_reads_its_cap() -> None:
    """One client, one object at a time, each waiting behind the previous: few bytes
    arrive and little waits at a tick, but the gate is busy all the time."""
    clock = Clock()
    gate = ClassGate(MB, None, burst_s=0.1, max_wait_s=5.0, clock=clock)
    meter = DemandMeter(sample(gate, 0.0), window_s=3.0)
    while clock.now < 1.0:
        wait = gate.reserve(100_000, bounded=False)
        clock.now += wait  # the next request is sent when this one is admitted
    use = meter.update(sample(gate, 1.0), MB, None)
    assert use.bandwidth_demand == pytest.approx(MB, rel=0.12)


def test_a_queue_taken_at_once_reads_as_the_rate_that_drains_it() -> None:
    clock = Clock()
    gate = ClassGate(MB, 100.0, burst_s=0.1, max_wait_s=5.0, clock=clock)
    meter = DemandMeter(sample(gate, 0.0), window_s=3.0)
    gate.reserve(10 * MB, bounded=False)
    clock.now = 1.0
    meter.update(sample(gate, 1.0), MB, 100.0)
    clock.now = 4.5  # arrivals are out of the window; 5.6 MB still wait
    use = meter.update(sample(gate, 4.5), MB, 100.0)
    # 10 MB - 0.1 MB of burst - 4.5 s x 1 MB/s: 5.4 MB to drain within the interval
    assert use.bandwidth_demand == pytest.approx(5.4 * MB / 3.5)
    assert use.bandwidth == pytest.approx(MB)  # admitted: the cap
    assert use.iops_demand == 0.0  # one operation, out of the window


def test_controller_promotes_a_closed_loop_burst_each_interval() -> None:
    """Four writers each keep one 256 KiB object waiting (a checkpoint): the class climbs
    one gear per interval, as the seed's rule does, although its queue is short."""
    clock = Clock()
    c = controller(clock)
    gate = c.gates["b"]
    ready = [0.0] * 4  # when each writer sends its next object
    decisions = []
    for second in range(1, 4):
        while min(ready) < second:
            w = ready.index(min(ready))
            clock.now = ready[w]
            ready[w] = clock.now + gate.reserve(OBJECT, bounded=False)
        clock.now = float(second)
        decisions.append(c.tick(clock.now)["b"])
    assert decisions == [Tuning.PROMOTE] * 3
