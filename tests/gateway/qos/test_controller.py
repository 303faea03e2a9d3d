"""The controller on a scripted clock: use measured from charged tokens, gears applied to
both gates, the device veto, the store shared between processes, status and metrics."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from gateway.qos.controller import QosController
from gateway.qos.gears import Tuning
from gateway.qos.model import QosClass, QosSettings
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
