"""The elastic controller's decisions on scripted ingest traces (no time passes)."""

from __future__ import annotations

import pytest

from gateway.cache.elastic import (
    Action,
    Decision,
    ElasticMachine,
    ElasticState,
    MachineSettings,
    Observation,
    next_size,
)

MiB = 1 << 20
B = 10 * MiB  # backend bandwidth
UT = 0.3
SETTINGS = MachineSettings(initial_size=100 * MiB, minimum=4 * MiB, granularity=MiB,
                           inactivity_delay_s=2.0, window_s=0.5, retry_s=5.0)


def obs(now: float, rate: float = 0.0, **kw: object) -> Observation:
    return Observation(now=now, ingest_rate=rate, threshold=UT * B, **kw)  # type: ignore[arg-type]


def run(machine: ElasticMachine, trace: list[Observation]) -> list[Decision]:
    """Step through ``trace``, completing attach/detach at once; the decisions made."""
    out = []
    for o in trace:
        d = machine.step(o)
        if d.action is Action.ATTACH:
            machine.attached(d.size, o.now, o.forced_bytes, o.ingest_bytes,
                             o.unflushed_bytes)
        elif d.action is Action.DETACH:
            machine.detached(o.now)
        if d.action is not Action.NONE:
            out.append(d)
    return out


def test_quiet_traffic_never_attaches() -> None:
    m = ElasticMachine(SETTINGS)
    assert run(m, [obs(t, rate=UT * B * 0.9) for t in range(10)]) == []
    assert m.state is ElasticState.IDLE


def test_burst_attach_phase_switch_detach() -> None:
    m = ElasticMachine(SETTINGS)
    trace = [obs(0.0), obs(0.5, rate=B), obs(1.0, rate=8 * B, used_bytes=40 * MiB),
             obs(1.5, rate=8 * B, used_bytes=60 * MiB),
             obs(2.0, used_bytes=60 * MiB), obs(3.0, used_bytes=60 * MiB),  # quiet < ID
             obs(4.0, used_bytes=60 * MiB),  # quiet for ID: the burst is over
             obs(5.0, used_bytes=60 * MiB, detachable=False),  # still flushing
             obs(6.0, used_bytes=60 * MiB, detachable=True)]
    decisions = run(m, trace)
    assert [d.action for d in decisions] == [Action.ATTACH, Action.RETIRE, Action.DETACH]
    assert decisions[0].size == 100 * MiB  # the first burst: the configured size
    assert m.state is ElasticState.IDLE
    (burst,) = m.history
    assert (burst.attached_at, burst.ended_at, burst.detached_at) == (0.5, 4.0, 6.0)
    assert burst.used_peak_bytes == 60 * MiB and burst.forced_bytes == 0
    assert m.size == 60 * MiB  # shrunk to what the burst used


def test_premature_flushes_grow_the_next_volume() -> None:
    m = ElasticMachine(SETTINGS)
    run(m, [obs(0.0, rate=B, forced_bytes=7),
            obs(1.0, rate=B, used_bytes=100 * MiB, forced_bytes=7 + 30 * MiB),
            obs(2.0, used_bytes=100 * MiB, forced_bytes=7 + 30 * MiB),
            obs(4.0, forced_bytes=7 + 30 * MiB, detachable=True),
            obs(4.5, detachable=True)])
    assert m.history[0].forced_bytes == 30 * MiB  # counted from the attach on
    assert m.size == 130 * MiB
    assert run(m, [obs(10.0, rate=B)]) == [Decision(Action.ATTACH, 130 * MiB)]


def test_admission_of_a_large_write_attaches_before_any_byte_flows() -> None:
    m = ElasticMachine(SETTINGS)
    assert m.step(obs(0.0, demand_bytes=MiB - 1)) == Decision(Action.NONE)
    assert m.step(obs(0.0, demand_bytes=MiB)).action is Action.ATTACH
    assert m.state is ElasticState.ATTACHING
    assert m.step(obs(0.1, rate=B)) == Decision(Action.NONE)  # waits for the attach


def test_burst_resumes_while_draining_then_ends_again() -> None:
    m = ElasticMachine(SETTINGS)
    decisions = run(m, [obs(0.0, rate=B), obs(1.0), obs(3.0, used_bytes=MiB),  # -> DRAINING
                        obs(3.5, rate=B, used_bytes=50 * MiB),  # a new burst before detach
                        obs(4.0, used_bytes=50 * MiB), obs(6.0), obs(6.5, detachable=True)])
    assert [d.action for d in decisions] == [Action.ATTACH, Action.RETIRE, Action.REACTIVATE,
                                             Action.RETIRE, Action.DETACH]
    (burst,) = m.history  # one volume lifetime, fused
    assert burst.used_peak_bytes == 50 * MiB and m.size == 50 * MiB


def test_draining_waits_for_a_clean_volume_and_refused_detach_keeps_draining() -> None:
    m = ElasticMachine(SETTINGS)
    run(m, [obs(0.0, rate=B), obs(1.0), obs(3.0)])
    assert m.state is ElasticState.DRAINING
    assert m.step(obs(4.0, detachable=False)).action is Action.NONE
    assert m.step(obs(5.0, detachable=True)).action is Action.DETACH
    m.detach_refused()
    assert m.state is ElasticState.DRAINING
    assert m.step(obs(6.0, detachable=True)).action is Action.DETACH


def test_failed_attach_waits_before_retrying() -> None:
    m = ElasticMachine(SETTINGS)
    assert m.step(obs(0.0, rate=B)).action is Action.ATTACH
    m.attach_failed(0.0)
    assert m.state is ElasticState.IDLE
    assert m.step(obs(4.9, rate=B)).action is Action.NONE
    assert m.step(obs(5.0, rate=B)).action is Action.ATTACH


def test_override_sizes_one_volume_only() -> None:
    m = ElasticMachine(SETTINGS)
    m.override = 8 * MiB
    d = m.step(obs(0.0, rate=B))
    assert d == Decision(Action.ATTACH, 8 * MiB)
    m.attached(d.size, 0.0, 0)
    assert m.override is None and m.next_volume_size() == 100 * MiB


def test_recovering_machine_drains_first() -> None:
    m = ElasticMachine(SETTINGS, recovering=True)
    assert m.state is ElasticState.DRAINING
    assert m.step(obs(0.0, detachable=True)).action is Action.DETACH


@pytest.mark.parametrize(("size", "used", "forced", "expected"), [
    (100, 60, 0, 60),  # shrink to what was used
    (100, 100, 30, 130),  # grow by what was flushed prematurely
    (100, 1, 0, 4),  # not below the minimum
    (100, 100, 500, 200),  # not above the maximum
    (100, 61, 0, 62),  # rounded up to the granularity
])
def test_next_size_rule(size: int, used: int, forced: int, expected: int) -> None:
    assert next_size(size, used, forced, minimum=4, maximum=200, granularity=2) == expected


def test_a_large_write_is_a_burst_whatever_b_is() -> None:
    """The rate of writes around the cache is what the backend takes: with B overstated
    it never exceeds UT x B, so a large write must start a burst on its own."""
    m = ElasticMachine(SETTINGS)
    huge = Observation(now=0.0, ingest_rate=B, threshold=1e12, demand_bytes=8 * MiB)
    assert m.step(huge).action is Action.ATTACH


def test_small_writes_attach_by_rate_only() -> None:
    m = ElasticMachine(SETTINGS)
    small = 64 * 1024
    assert m.step(obs(0.0, demand_bytes=small)) == Decision(Action.NONE)
    assert m.step(obs(0.5, rate=UT * B, demand_bytes=small)).action is Action.ATTACH


def test_a_large_write_while_draining_resumes_the_burst() -> None:
    m = ElasticMachine(SETTINGS)
    run(m, [obs(0.0, rate=B), obs(1.0), obs(3.0)])  # quiet for ID: draining
    assert m.state is ElasticState.DRAINING
    assert m.step(obs(3.5, demand_bytes=5 * MiB)) == Decision(Action.REACTIVATE)
    assert m.state is ElasticState.BURST


def burst_trace(start: float, ingest: int, size: int, *, resident: int) -> list[Observation]:
    """One checkpoint of ``size`` bytes arriving over 1 s from ``start`` (cumulative
    ingest ``ingest`` before it), only ``resident`` bytes of it on the volume (the rest
    sent past it by choice), then quiet, drained and detached."""
    end = ingest + size
    return [obs(start, demand_bytes=MiB, ingest_bytes=ingest),
            obs(start + 0.5, rate=size, ingest_bytes=ingest + size // 2,
                used_bytes=resident // 2),
            obs(start + 1.0, rate=size, ingest_bytes=end, used_bytes=resident),
            obs(start + 2.0, ingest_bytes=end), obs(start + 4.0, ingest_bytes=end),
            obs(start + 4.5, ingest_bytes=end, detachable=True)]


def test_the_next_volume_holds_what_the_burst_brought_not_what_was_resident() -> None:
    """Half the checkpoint went past the volume by the admission rule's choice: the
    volume's peak (32 MiB) is not what the burst needed (64 MiB, plus the headroom)."""
    m = ElasticMachine(SETTINGS)
    run(m, burst_trace(0.0, 5 * MiB, 64 * MiB, resident=32 * MiB))
    (burst,) = m.history
    assert burst.used_peak_bytes == 32 * MiB and burst.needed_bytes == 64 * MiB
    assert burst.arrival_s == 1.0
    assert m.size == 65 * MiB  # 64 MiB x (1 + 1/64), rounded up to 1 MiB


def test_identical_bursts_get_identical_volumes() -> None:
    """Whatever part of each checkpoint happened to be resident, the same checkpoint
    gives the same volume, from one burst to the next."""
    m = ElasticMachine(SETTINGS)
    sizes, ingest = [], 0
    for k, resident in enumerate((64 * MiB, 20 * MiB, 48 * MiB, 64 * MiB)):
        decisions = run(m, burst_trace(10.0 * k, ingest, 64 * MiB, resident=resident))
        sizes.append(decisions[0].size)
        ingest += 64 * MiB
    assert sizes == [100 * MiB, 65 * MiB, 65 * MiB, 65 * MiB]


def test_a_resumed_burst_needs_room_for_what_it_found_unflushed() -> None:
    """The next checkpoint arrives while the volume still drains 10 MiB of the last."""
    m = ElasticMachine(SETTINGS)
    run(m, [obs(0.0, demand_bytes=MiB), obs(0.5, rate=B, ingest_bytes=64 * MiB),
            obs(1.0, ingest_bytes=64 * MiB), obs(3.0, ingest_bytes=64 * MiB)])  # DRAINING
    assert m.state is ElasticState.DRAINING and m.size == 65 * MiB
    run(m, [obs(3.5, demand_bytes=MiB, ingest_bytes=64 * MiB, unflushed_bytes=10 * MiB),
            obs(4.0, rate=B, ingest_bytes=128 * MiB), obs(5.0, ingest_bytes=128 * MiB),
            obs(7.0, ingest_bytes=128 * MiB), obs(7.5, detachable=True)])
    assert m.history[0].needed_bytes == 74 * MiB
    assert m.size == 76 * MiB  # 74 MiB x (1 + 1/64) = 75.2 MiB, rounded up
