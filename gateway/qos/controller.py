"""The QoS controller: every interval it measures each class's demand at its gates
(``demand.py``: arrivals over a window, saturation, queue), reads the device utilization, and
promotes or demotes (seed Algorithm 1); it owns the gates the request path and the flush
path wait on.

``tick(now)`` is the whole decision step and takes the time as an argument, so tests
drive it with a scripted clock; ``start()`` runs it every ``interval`` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from gateway.background import PeriodicTask
from gateway.qos.demand import IDLE, DemandMeter, Use, sample
from gateway.qos.gate import ClassGate
from gateway.qos.gears import GearState, Tuning
from gateway.qos.model import QosClass, QosSettings, split_class
from gateway.qos.store import Overrides, QosStore

log = logging.getLogger("squall.qos")


class QosController:
    """Classes, gears, gates and bills of one gateway process."""

    def __init__(self, settings: QosSettings, *, store: QosStore | None = None,
                 share: float = 1.0, utilization: Callable[[float], float] = lambda now: 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.share = share
        self._store = store
        self._utilization = utilization
        self._clock = clock
        self._overrides: Overrides = {}
        self._stamp: float | None = None
        #: request-path gates by class name (a bucket, or ``user:NAME``): the S3
        #: endpoint's lookups per request, none while the map is empty
        self.gates: dict[str, ClassGate] = {}
        self.flush_gates: dict[str, ClassGate] = {}
        self.states: dict[str, GearState] = {}  # every class ever active (bills survive)
        self._meters: dict[str, tuple[DemandMeter, DemandMeter]] = {}  # request, flush
        self._last_tick: float | None = None
        self.utilization = 0.0
        #: per class: admitted and demanded bytes/s and ops/s, flush bytes/s admitted
        self._used: dict[str, Use] = {}
        self._loop = PeriodicTask(self._step, every=lambda: self.settings.interval,
                                  name="squall-qos", log=log, failed="qos: tuning step")
        self._apply()

    # -- classes -----------------------------------------------------------------------
    def classes(self) -> dict[str, QosClass]:
        """The effective classes: the config file's, then the API's changes."""
        merged: dict[str, QosClass | None] = {**self.settings.classes(), **self._overrides}
        return {name: cls for name, cls in merged.items() if cls is not None}

    def _gate(self, state: GearState) -> ClassGate:
        return ClassGate(*state.gate_caps(), burst_s=self.settings.burst,
                         max_wait_s=self.settings.max_wait, clock=self._clock,
                         credit=state.credit())

    def _new_gates(self, name: str, state: GearState) -> None:
        self.gates[name] = self._gate(state)
        self.flush_gates[name] = self._gate(state)
        now, window = self._clock(), self.settings.window
        self._meters[name] = (DemandMeter(sample(self.gates[name], now), window),
                              DemandMeter(sample(self.flush_gates[name], now), window))

    def _apply(self) -> None:
        wanted = self.classes()
        for name in list(self.gates):
            if name not in wanted:
                del self.gates[name]
                del self.flush_gates[name]
                self._meters.pop(name, None)
        for name, spec in wanted.items():
            state = self.states.get(name)
            if state is None:
                state = self.states[name] = GearState(spec, share=self.share)
            elif state.spec != spec:
                credit_changed = state.credit() != GearState(spec, share=self.share).credit()
                state.respec(spec)
                if credit_changed:  # credit buckets made, changed or dropped: new gates
                    self._new_gates(name, state)
            if name in self.gates:
                self.gates[name].set_caps(*state.gate_caps())
                self.flush_gates[name].set_caps(*state.gate_caps())
            else:
                self._new_gates(name, state)

    async def set(self, name: str, spec: QosClass) -> None:
        """Give the class ``name`` (a bucket, or ``user:NAME``) the spec ``spec`` (kept in
        the store)."""
        await self._change(name, spec)

    async def clear(self, name: str) -> bool:
        """Remove the class ``name``; False if there was none."""
        if name not in self.classes():
            return False
        await self._change(name, None)
        return True

    async def _change(self, name: str, spec: QosClass | None) -> None:
        overrides = {**self._overrides, name: spec}
        if spec is None and name not in self.settings.classes():
            overrides.pop(name)
        if self._store is not None:
            await asyncio.to_thread(self._store.save, overrides)
            self._stamp = await asyncio.to_thread(self._store.stamp)
        self._overrides = overrides
        self._apply()

    async def reload(self) -> None:
        """Re-read the store if another process (worker) changed it."""
        if self._store is None:
            return
        stamp = await asyncio.to_thread(self._store.stamp)
        if stamp == self._stamp:
            return
        self._overrides = await asyncio.to_thread(self._store.load)
        self._stamp = stamp
        self._apply()

    # -- enforcement -------------------------------------------------------------------
    async def pace_flush(self, bucket: str, nbytes: int) -> None:
        """Delay the flush of ``nbytes`` of ``bucket`` to its class's current gear."""
        gate = self.flush_gates.get(bucket)
        if gate is not None:
            await gate.pace(nbytes)

    # -- tuning ------------------------------------------------------------------------
    def tick(self, now: float) -> dict[str, Tuning]:
        """One tuning step at time ``now``: measure, bill, decide, apply the new caps."""
        last, self._last_tick = self._last_tick, now
        self.utilization = self._utilization(now)
        if last is None or now <= last:
            return {}
        dt = now - last
        decisions = {}
        for name, gate in self.gates.items():
            flush = self.flush_gates[name]
            state = self.states[name]
            request_meter, flush_meter = self._meters[name]
            caps = (state.bandwidth_cap, state.iops_cap)  # held during the interval
            request = request_meter.update(sample(gate, now), *caps)
            flushed = flush_meter.update(sample(flush, now), *caps)
            use = Use(*(max(a, b) for a, b in zip(request, flushed, strict=True)))
            self._used[name] = use._replace(flush_bandwidth=flushed.bandwidth)
            decision = state.tick(dt, use.bandwidth_demand, use.iops_demand,
                                  self.utilization)
            if decision in (Tuning.PROMOTE, Tuning.DEMOTE):
                log.info("qos: %s %s to gear %d (demand %.0f B/s, %.0f ops/s; device "
                         "%.0f%%)", decision.value, name, state.gear, use.bandwidth_demand,
                         use.iops_demand, 100 * self.utilization)
                gate.set_caps(*state.gate_caps())
                flush.set_caps(*state.gate_caps())
            decisions[name] = decision
        return decisions

    async def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _step(self) -> None:
        await self.reload()
        self.tick(self._clock())

    # -- output ------------------------------------------------------------------------
    def describe(self, name: str) -> dict[str, Any]:
        state = self.states[name]
        use = self._used.get(name, IDLE)
        gate = self.gates[name]
        described = {"gear": state.gear, "max_gear": state.spec.max_gear,
                     "bandwidth_cap": state.bandwidth_cap, "iops_cap": state.iops_cap,
                     "bandwidth_used": use.bandwidth, "iops_used": use.iops,
                     "bandwidth_demand": use.bandwidth_demand,
                     "iops_demand": use.iops_demand,
                     "flush_bandwidth_used": use.flush_bandwidth,
                     "gear_seconds": state.gear_seconds,
                     "seconds_at_gear": list(state.seconds_at_gear),
                     "refused": gate.refused,
                     "class": state.spec.model_dump()}
        if gate.credit_bandwidth is not None:
            credits = gate.credit_bandwidth
            described["peak_bandwidth_cap"] = gate.bandwidth.rate
            described["credit_s"] = credits.level() / credits.rate  # seconds of G0 left
        return described

    def status(self) -> dict[str, Any]:
        """The ``qos`` object of ``/_squall/status`` (docs/qos.md): the classes of
        buckets and of users."""
        described: dict[str, dict[str, Any]] = {"bucket": {}, "user": {}}
        for name in sorted(self.gates):
            kind, subject = split_class(name)
            described[kind][subject] = self.describe(name)
        return {"buckets": described["bucket"], "users": described["user"],
                "utilization": self.utilization, "interval_s": self.settings.interval,
                "share": self.share}

    def reserved_mb(self) -> dict[str, float]:
        """Per class, the integral of its reserved bandwidth in MB (priced by the cost
        meter); classes cleared since keep what they were billed."""
        return {name: state.reserved_mb for name, state in self.states.items()}

    def register_metrics(self, registry: Any) -> None:
        """``squall_qos_gear{bucket}``, ``squall_qos_gear_seconds_total{bucket}`` and their
        ``squall_qos_user_*{user}`` twins."""
        registry.register(_Collector(self))


class _Collector:
    def __init__(self, controller: QosController) -> None:
        self._controller = controller

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        c = self._controller
        for kind, prefix in (("bucket", "squall_qos"), ("user", "squall_qos_user")):
            gear = GaugeMetricFamily(f"{prefix}_gear", f"current performance gear n of a "
                                     f"{kind}'s QoS class (cap = 2^n x G0)", labels=[kind])
            cap = GaugeMetricFamily(f"{prefix}_bandwidth_cap_bytes", "bandwidth cap of the "
                                    "current gear (bytes/s)", labels=[kind])
            for name in sorted(c.gates):
                if split_class(name)[0] == kind:
                    gear.add_metric([split_class(name)[1]], c.states[name].gear)
                    cap.add_metric([split_class(name)[1]], c.states[name].bandwidth_cap)
            seconds = CounterMetricFamily(f"{prefix}_gear_seconds", "G0-equivalent seconds "
                                          "billed (a second at gear n counts 2^n)",
                                          labels=[kind])
            for name in sorted(c.states):
                if split_class(name)[0] == kind:
                    seconds.add_metric([split_class(name)[1]], c.states[name].gear_seconds)
            yield gear
            yield cap
            yield seconds
