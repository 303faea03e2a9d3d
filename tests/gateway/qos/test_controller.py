"""The controller on a scripted clock: use measured from charged tokens, gears applied to
both gates, the device veto, the store shared between processes, status and metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from backends.core.errors import SlowDown
from gateway.qos.controller import QosController
from gateway.qos.gears import Tuning
from gateway.qos.model import QosClass, QosSettings, split_class, user_class
from gateway.qos.store import QosStore, QosStoreError, store_path

MB = 1_000_000


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def controller(clock: Clock, util: float = 0.0, **kw: object) -> QosController:
    settings = QosSettings.model_validate({"buckets": {"b": {"g0_bandwidth": "1MB/s",
                                                             "demote_after": 2, **kw}}})
    return QosController(settings, utilization=lambda now: util, clock=clock)


def run_second(c: QosController, clock: Clock, request_mb: float, flush_mb: float = 0) -> Tuning:
    c.gates["b"].reserve(int(request_mb * MB), bounded=False)
    c.flush_gates["b"].reserve(int(flush_mb * MB), bounded=False)
    clock.now += 1.0
    return c.tick(clock.now)["b"]


def test_burst_promotes_then_demotes_and_caps_follow() -> None:
    clock = Clock()
    c = controller(clock)
    c.tick(clock.now)
    trace = [run_second(c, clock, mb) for mb in (1.0, 2.0, 4.0, 0.1, 0.1, 0.1, 0.1)]
    assert trace == [Tuning.PROMOTE, Tuning.PROMOTE, Tuning.PROMOTE,
                     Tuning.HOLD, Tuning.DEMOTE, Tuning.HOLD, Tuning.DEMOTE]
    assert c.states["b"].gear == 1
    assert c.gates["b"].bandwidth.rate == 2 * MB == c.flush_gates["b"].bandwidth.rate
    described = c.status()["buckets"]["b"]
    assert described["gear"] == 1 and described["max_gear"] == 3
    assert described["bandwidth_cap"] == 2 * MB
    assert described["bandwidth_used"] == pytest.approx(0.1 * MB)
    assert described["gear_seconds"] == 1 + 2 + 4 + 8 + 8 + 4 + 4


def test_flush_path_use_promotes() -> None:
    clock = Clock()
    c = controller(clock)
    c.tick(clock.now)
    assert run_second(c, clock, 0.0, flush_mb=1.0) is Tuning.PROMOTE
    assert c.status()["buckets"]["b"]["flush_bandwidth_used"] == pytest.approx(MB)


def test_device_veto() -> None:
    clock = Clock()
    c = controller(clock, util=0.95)
    c.tick(clock.now)
    assert run_second(c, clock, 1.0) is Tuning.VETOED
    assert c.states["b"].gear == 0


def test_metrics() -> None:
    clock = Clock()
    c = controller(clock)
    registry = CollectorRegistry()
    c.register_metrics(registry)
    c.tick(clock.now)
    run_second(c, clock, 1.0)
    text = generate_latest(registry).decode()
    assert 'squall_qos_gear{bucket="b"} 1.0' in text
    assert 'squall_qos_gear_seconds_total{bucket="b"} 1.0' in text


def test_set_clear_and_reload_from_the_shared_store(tmp_path: Path) -> None:
    async def scenario() -> None:
        path = store_path(tmp_path / "worker-0", workers=2)
        assert path == tmp_path / "qos.json"
        config = QosSettings.model_validate({"buckets": {"cfg": {"g0_bandwidth": 1000}}})
        one = QosController(config, store=QosStore(path), share=0.5)
        two = QosController(config, store=QosStore(path), share=0.5)
        await one.set("api", QosClass(g0_bandwidth=4000, max_gear=1))
        assert await one.clear("cfg") is True
        assert await one.clear("nothing") is False
        await two.reload()
        assert set(two.gates) == {"api"}
        assert two.states["api"].bandwidth_cap == 2000  # half of G0 per worker
        await one.clear("api")
        await two.reload()
        assert set(two.gates) == set()
        assert "api" in two.reserved_mb()  # billed classes stay billed
    asyncio.run(scenario())


def test_damaged_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "qos.json"
    path.write_text('{"magic": "squall.qos", "v": 9, "buckets": {}}')
    with pytest.raises(QosStoreError, match="format 9"):
        QosStore(path).load()
    path.write_text("not json")
    with pytest.raises(QosStoreError, match="damaged"):
        QosStore(path).load()


def test_bad_classes_are_refused() -> None:
    from pydantic import ValidationError

    for bad in ({"g0_bandwidth": "fast"}, {"g0_bandwidth": "0"},
                {"g0_bandwidth": "1MB/s", "max_gear": 17},
                {"g0_bandwidth": "1MB/s", "threshold": 1.5},
                {"g0_bandwidth": "1MB/s", "colour": "red"}):
        with pytest.raises(ValidationError):
            QosClass.model_validate(bad)


def seed_controller(clock: Clock, **settings: object) -> QosController:
    """A class with every default (the seed's rules), G0 = 1 MB/s."""
    config = QosSettings.model_validate({**settings, "buckets": {"b": {"g0_bandwidth": MB}}})
    return QosController(config, clock=clock)


def test_a_backlog_taken_earlier_still_reads_as_demand() -> None:
    clock = Clock()
    c = seed_controller(clock)
    c.tick(clock.now)
    c.gates["b"].reserve(5 * MB, bounded=False)  # 5 s of G0 queued at once
    clock.now += 1.0
    assert c.tick(clock.now)["b"] is Tuning.PROMOTE
    # Nothing new arrives, but 1.9 MB still wait: the gate is busy, the class promotes
    # (taken tokens alone would read 0 B/s and demote it).
    clock.now += 1.0
    assert c.tick(clock.now)["b"] is Tuning.PROMOTE
    described = c.status()["buckets"]["b"]
    assert described["bandwidth_used"] == pytest.approx(2 * MB)  # gear 1's cap, admitted
    # the largest reading: 5 MB arrived over the 2 s there are (window 3 s), 2.5 MB/s;
    # the gate was busy all along at 2 MB/s; 1.9 MB wait
    assert described["bandwidth_demand"] == pytest.approx(2.5 * MB)


def test_refused_requests_count_as_demand() -> None:
    clock = Clock()
    c = seed_controller(clock, max_wait=0.5)
    c.tick(clock.now)
    gate = c.gates["b"]
    gate.reserve(MB // 2)  # waits 0.4 s
    with pytest.raises(SlowDown):
        gate.reserve(MB // 2)  # would wait 0.9 s
    clock.now += 1.0
    assert c.tick(clock.now)["b"] is Tuning.PROMOTE  # 0.5 admitted + 0.5 refused
    assert c.status()["buckets"]["b"]["bandwidth_used"] == pytest.approx(MB / 2)


def test_seed_demotion_one_gear_per_interval_once_idle() -> None:
    clock = Clock()
    c = seed_controller(clock)
    c.tick(clock.now)
    trace = [run_second(c, clock, mb) for mb in (1.0, 2.0, 4.0, 0, 0, 0, 0)]
    assert trace == [Tuning.PROMOTE] * 3 + [Tuning.DEMOTE] * 3 + [Tuning.HOLD]
    assert c.gates["b"].bandwidth.rate == MB
    # billed: 1 + 2 + 4 at the climb, then 8, 4, 2 while stepping down, then 1
    assert c.states["b"].gear_seconds == 1 + 2 + 4 + 8 + 4 + 2 + 1


def test_demand_between_the_caps_holds_the_gear() -> None:
    clock = Clock()
    c = seed_controller(clock)
    c.tick(clock.now)
    assert run_second(c, clock, 1.0) is Tuning.PROMOTE  # gear 1: 2 MB/s
    # 1.5 MB/s: above gear 0's cap, below 95% of gear 1's: neither up nor down.
    assert [run_second(c, clock, 1.5) for _ in range(3)] == [Tuning.HOLD] * 3


def test_credit_class_bursts_at_the_peak_and_bills_the_baseline() -> None:
    clock = Clock()
    config = QosSettings.model_validate({"burst": 0.1, "buckets": {
        "b": {"g0_bandwidth": MB, "max_gear": 2, "credit_s": 3}}})
    c = QosController(config, clock=clock)
    c.tick(clock.now)
    gate = c.gates["b"]
    assert gate.bandwidth.rate == 4 * MB  # the top gear's cap is the peak
    assert gate.reserve(3 * MB, bounded=False) == pytest.approx(2.6 / 4)  # credits pay
    clock.now += 1.0
    assert c.tick(clock.now)["b"] is Tuning.HOLD  # no gears
    # The 3 s of credit are spent; 1 s refilled 1 MB: the next 2 MB run at the baseline.
    assert gate.reserve(2 * MB, bounded=False) == pytest.approx(1.0)
    described = c.status()["buckets"]["b"]
    assert described["gear"] == 0 and described["peak_bandwidth_cap"] == 4 * MB
    assert described["credit_s"] == pytest.approx(-1.0)  # 1 s of baseline owed
    assert c.states["b"].gear_seconds == 1.0  # billed at G0
    # Switching the class back to gears drops the credit buckets.
    asyncio.run(c.set("b", QosClass(g0_bandwidth=MB, max_gear=2)))
    assert c.gates["b"].credit_bandwidth is None and c.gates["b"].bandwidth.rate == MB


def test_user_classes_from_the_file_and_the_api_are_shown_and_metered() -> None:
    async def scenario() -> None:
        clock = Clock()
        settings = QosSettings.model_validate(
            {"buckets": {"b": {"g0_bandwidth": "1MB/s"}},
             "users": {"alice": {"g0_bandwidth": "2MB/s", "max_gear": 1}}})
        c = QosController(settings, clock=clock)
        assert set(c.gates) == {"b", user_class("alice")}
        await c.set(user_class("bob"), QosClass(g0_bandwidth=3 * MB))
        status = c.status()
        assert set(status["buckets"]) == {"b"}
        assert set(status["users"]) == {"alice", "bob"}
        assert status["users"]["alice"]["bandwidth_cap"] == 2 * MB
        registry = CollectorRegistry()
        c.register_metrics(registry)
        c.tick(clock.now)
        c.gates[user_class("alice")].reserve(2 * MB, bounded=False)
        clock.now += 1.0
        assert c.tick(clock.now)[user_class("alice")] is Tuning.PROMOTE
        text = generate_latest(registry).decode()
        assert 'squall_qos_user_gear{user="alice"} 1.0' in text
        assert 'squall_qos_user_gear_seconds_total{user="bob"} 1.0' in text
        assert 'squall_qos_gear{bucket="b"} 0.0' in text
        assert "user:" not in text
        # A class of the file cleared by the API stays cleared; one of the API goes.
        assert await c.clear(user_class("alice")) is True
        assert await c.clear(user_class("bob")) is True
        assert set(c.status()["users"]) == set()

    asyncio.run(scenario())


def test_split_class_names() -> None:
    assert split_class(user_class("a.b@c")) == ("user", "a.b@c")
    assert split_class("my-bucket") == ("bucket", "my-bucket")
