"""The elastic controller: performs :class:`~gateway.cache.elastic.ElasticMachine`'s
decisions on a running cache tier (attach and detach volumes through a provisioner).

Every control interval it measures ingest (bytes clients wrote, cached or written
around), the attached volume's use and the bytes flushed prematurely, and steps the
machine; a write that arrives while no volume takes writes asks :meth:`admit` first, which
may attach one (the write waits for it) or resume a draining one. While no volume is
attached, writes go straight to the backend (the tier's write-around path). A volume is
detached only when nothing on it is needed (:meth:`SpaceManager.volume_idle`); a crash while
one is attached loses nothing: the provisioner lists it again at start, the index replays,
and the controller drains and detaches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from backends.core.errors import SlowDown
from backends.throttle import TokenBucket
from gateway.background import PeriodicTask
from gateway.cache.elastic import (
    Action,
    BurstRecord,
    Decision,
    ElasticMachine,
    ElasticState,
    MachineSettings,
    Observation,
)
from gateway.cache.policy import WritebackPolicy
from gateway.cache.provisioner import Provisioner, ProvisionError, VolumeHandle
from gateway.cache.settings import CacheSettings, ElasticSettings
from gateway.cache.store import CacheStore
from gateway.cache.volumes import Volume

log = logging.getLogger(__name__)

_REQUIRED = 1 << 62  # demand that always asks for a volume
_HISTORY_IN_STATUS = 8


class ElasticController:
    """Attaches and detaches the volumes of ``store``'s space manager through
    ``provisioner``, reading ingest from ``store`` and the backend rate and phase from
    ``policy``; ``listeners`` are called just before and after each attach or detach."""

    def __init__(self, store: CacheStore, policy: WritebackPolicy, provisioner: Provisioner,
                 settings: ElasticSettings, cache: CacheSettings, *,
                 listeners: list[Callable[[], object]] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self._store = store
        self._space = store.space
        self._policy = policy
        self._provisioner = provisioner
        self.settings = settings
        self._ut = cache.utilization_threshold
        self._machine_settings = MachineSettings(
            initial_size=settings.initial_size_bytes, minimum=settings.min_size_bytes,
            maximum=settings.max_size_bytes, granularity=settings.granularity_bytes,
            inactivity_delay_s=cache.inactivity_delay_s, window_s=cache.control_interval_s,
            retry_s=settings.retry_s)
        self.machine = ElasticMachine(self._machine_settings)
        self._listeners = listeners if listeners is not None else []
        self._clock = clock
        self._wall_offset = wall() - clock()
        self._volumes: dict[str, tuple[VolumeHandle, Volume]] = {}
        self._loop = PeriodicTask(self._tick, every=cache.control_interval_s,
                                  name="cache-elastic", log=log,
                                  failed="elastic cache controller")
        self._attach_task: asyncio.Task[None] | None = None
        self._detach_task: asyncio.Task[None] | None = None
        self._draining = False
        self.ingest_rate = 0.0
        self._last_at = clock()
        self._last_ingest = self._store.stats.ingest_bytes_total
        self._last_diverted = self._store.stats.diverted_bytes_total
        self._diverted = 0
        self.attaches_total = 0
        self.detaches_total = 0

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self, recovered: list[tuple[VolumeHandle, Volume]]) -> None:
        """Adopt volumes a crash left attached (they drain, then detach) and start ticking."""
        for handle, vol in recovered:
            self._adopt(handle, vol)
        self.machine = ElasticMachine(self._machine_settings, recovering=bool(recovered))
        if recovered:
            log.info("elastic cache: %d volume(s) found attached; draining them",
                     len(recovered))
            self._set_retiring(True)
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        for task in (self._attach_task, self._detach_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._attach_task = self._detach_task = None

    def _tick(self) -> None:
        self._measure()
        self._perform(self.machine.step(self._observe()))

    # -- measurements ------------------------------------------------------------------------
    def _measure(self) -> None:
        now, stats = self._clock(), self._store.stats
        self.ingest_rate = (stats.ingest_bytes_total - self._last_ingest) \
            / max(now - self._last_at, 1e-6)
        if self.machine.state is ElasticState.BURST:  # past a full volume, not by choice
            self._diverted += stats.diverted_bytes_total - self._last_diverted
        self._last_at, self._last_ingest = now, stats.ingest_bytes_total
        self._last_diverted = stats.diverted_bytes_total

    @property
    def threshold(self) -> float:
        """UT x B_b in bytes/s (0 while B_b is unknown: any ingest is a burst)."""
        return self._ut * (self._policy.bandwidth or 0.0)

    def forced_bytes(self) -> int:
        """Bytes flushed prematurely or diverted past a full volume, so far."""
        return self._store.stats.forced_flush_bytes_total + self._diverted

    def _observe(self, demand: int = 0) -> Observation:
        vols = [vol for _, vol in self._volumes.values()]
        return Observation(now=self._clock(), ingest_rate=self.ingest_rate,
                           threshold=self.threshold, demand_bytes=demand,
                           used_bytes=sum(v.take_peak() for v in vols),
                           forced_bytes=self.forced_bytes(),
                           detachable=all(self._space.volume_idle(v) for v in vols),
                           ingest_bytes=self._store.stats.ingest_bytes_total,
                           unflushed_bytes=self._unflushed())

    def _unflushed(self) -> int:
        """Dirty records and cached parts: what a volume holds that a burst cannot evict."""
        return self._store.dirty_bytes + self._store.part_bytes

    # -- admission of one write --------------------------------------------------------------
    async def admit(self, size: int | None, *, require: bool = False) -> None:
        """Called before a write while no volume may take it: attach one (and wait for
        it) or resume a draining one if the write lifts demand above UT x B_b.
        ``require``: the write cannot go past the cache (SlowDown if no volume); a
        ``size`` of None (unknown) is taken as a large write."""
        machine = self.machine
        large = self._machine_settings.burst_write_bytes
        demand = large if size is None else size
        if machine.state is ElasticState.BURST:
            if demand >= large and self._policy.write_around:
                self._policy.resume()  # the writeback's own quiet period ended first
            return
        if machine.state in (ElasticState.IDLE, ElasticState.DRAINING):
            if require and not self._space.volumes:
                demand = _REQUIRED
            self._perform(machine.step(self._observe(demand)))
        task = self._attach_task
        if machine.state is ElasticState.ATTACHING and task is not None:
            await asyncio.shield(task)
        if require and not self._space.volumes:
            raise SlowDown("no cache volume could be attached", retry_after=5)

    def set_next_size(self, size: int) -> None:
        """Size the next volume ``size`` bytes, once (calibration measures chosen sizes)."""
        if size <= 0:
            raise ValueError("the next volume size must be > 0")
        self.machine.override = size

    # -- actions -----------------------------------------------------------------------------
    def _perform(self, decision: Decision) -> None:
        if decision.action is Action.ATTACH:
            self._attach_task = asyncio.create_task(self._attach(decision.size),
                                                    name="cache-elastic-attach")
        elif decision.action is Action.RETIRE:
            log.info("elastic cache: burst over; draining %s", self._names())
            self._set_retiring(True)
        elif decision.action is Action.REACTIVATE:
            log.info("elastic cache: burst resumed on %s", self._names())
            self._set_retiring(False)
            self._policy.resume()
        elif decision.action is Action.DETACH:
            self._detach_task = asyncio.create_task(self._detach(), name="cache-elastic-detach")

    def _names(self) -> str:
        return ", ".join(h.id for h, _ in self._volumes.values()) or "-"

    def _set_retiring(self, retiring: bool) -> None:
        for _, vol in self._volumes.values():
            vol.retiring = retiring
        if retiring != self._draining:  # flush at full speed while draining
            self._draining = retiring
            if retiring:
                self._store.begin_drain()
            else:
                self._store.end_drain()
        self._store.changed()

    def _adopt(self, handle: VolumeHandle, vol: Volume) -> None:
        if handle.bandwidth_bytes_per_s:
            rate = handle.bandwidth_bytes_per_s
            vol.limiter = TokenBucket(rate, max(rate * 0.1, 1.0))
        self._volumes[vol.id] = (handle, vol)

    def _notify(self) -> None:
        for listener in self._listeners:
            try:
                listener()
            except Exception:  # a listener (the cost meter) must not break attach/detach
                log.exception("elastic cache listener failed")

    async def _attach(self, size: int) -> None:
        self._notify()
        try:
            handle = await self._provisioner.attach(size, self.settings
                                                    .volume_bandwidth_bytes_per_s)
            try:
                vol = await self._space.add_volume(handle.path, handle.size_bytes)
            except BaseException:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._provisioner.detach(handle))
                raise
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - writes go to the backend meanwhile
            log.warning("elastic cache: attaching a %d-byte volume failed: %s", size, exc)
            self.machine.attach_failed(self._clock())
            return
        self._adopt(handle, vol)
        self.attaches_total += 1
        # Writes that went around before this burst are not diversions past its volume.
        self._last_diverted = self._store.stats.diverted_bytes_total
        self.machine.attached(size, self._clock(), self.forced_bytes(),
                              self._store.stats.ingest_bytes_total, self._unflushed())
        log.info("elastic cache: attached %s (%d bytes)", handle.id, size)
        self._notify()

    async def _detach(self) -> None:
        self._notify()
        try:
            for key, (handle, vol) in list(self._volumes.items()):
                if not await self._space.remove_volume(vol):
                    self.machine.detach_refused()
                    return
                del self._volumes[key]
                try:
                    await self._provisioner.detach(handle)
                except ProvisionError as exc:  # found again (and detached) at next start
                    log.warning("elastic cache: %s", exc)
                self.detaches_total += 1
                log.info("elastic cache: detached %s", handle.id)
            self._set_retiring(False)
            self.machine.detached(self._clock())
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("elastic cache: detaching failed")
            self.machine.detach_refused()
        finally:
            self._notify()

    # -- status ------------------------------------------------------------------------------
    def volume_status(self) -> list[dict[str, Any]]:
        return [{"id": h.id, "path": str(h.path), "provider": h.provider,
                 "size_bytes": vol.capacity, "used_bytes": vol.used,
                 "bandwidth_bytes_per_s": h.bandwidth_bytes_per_s,
                 "attached_since": h.attached_at,
                 "state": "retiring" if vol.retiring else "active"}
                for h, vol in self._volumes.values()]

    def _record(self, burst: BurstRecord) -> dict[str, Any]:
        out = asdict(burst)
        out.pop("forced_base", None)
        out.pop("arrival", None)
        for key in ("attached_at", "ended_at", "detached_at"):
            if out[key] is not None:
                out[key] += self._wall_offset
        return out

    def status(self) -> dict[str, Any]:
        machine = self.machine
        history = machine.history[-_HISTORY_IN_STATUS:]
        return {"state": machine.state.value,
                "next_size_bytes": machine.next_volume_size(),
                "ingest_rate_bytes_per_s": self.ingest_rate,
                "threshold_bytes_per_s": self.threshold,
                "forced_bytes_total": self.forced_bytes(),
                "attaches_total": self.attaches_total,
                "detaches_total": self.detaches_total,
                "current_burst": self._record(machine.current) if machine.current else None,
                "bursts": [self._record(b) for b in history]}

    def register_metrics(self, registry: CollectorRegistry) -> None:
        registry.register(_ElasticCollector(self))


class _ElasticCollector(Collector):
    def __init__(self, controller: ElasticController) -> None:
        self._controller = controller

    def collect(self) -> Iterator[Metric]:
        c = self._controller
        state = GaugeMetricFamily("squall_cache_elastic_state",
                                  "Elastic controller state (1 for the current one)",
                                  labels=["state"])
        for s in ElasticState:
            state.add_metric([s.value], 1.0 if c.machine.state is s else 0.0)
        yield state
        yield GaugeMetricFamily("squall_cache_elastic_next_size_bytes",
                                "Size of the next elastic volume (from experience)",
                                value=float(c.machine.next_volume_size()))
        yield CounterMetricFamily("squall_cache_elastic_attaches", "Volumes attached",
                                  value=float(c.attaches_total))
        yield CounterMetricFamily("squall_cache_elastic_detaches", "Volumes detached",
                                  value=float(c.detaches_total))
        yield CounterMetricFamily("squall_cache_elastic_forced_bytes",
                                  "Bytes flushed prematurely or diverted past a full cache",
                                  value=float(c.forced_bytes()))

    def describe(self) -> Iterator[Metric]:
        return iter(())

