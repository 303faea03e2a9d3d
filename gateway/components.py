"""The composition root: the storage stack and services, built once from Settings.

backend (posix | ...) -> [ThrottledBackend] -> [CacheTier] -> [ClusterBackend] -> ObjectService
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from backends.core.base import Backend, ElasticBackend, LocalBackend, ProbedBackend
from backends.registry import BackendOptions, create_backend
from backends.throttled import ThrottledBackend, ThrottleSettings
from gateway.auth.credentials import Credentials
from gateway.cache.provisioner import LocalProvisioner
from gateway.cache.settings import CacheSettings, CacheVolumeSettings, ElasticSettings
from gateway.cache.tier import CacheTier
from gateway.cluster.node import ClusterNode
from gateway.config.settings import Settings
from gateway.cost.meter import CostMeter, sample_from_status
from gateway.lifecycle.scanner import LifecycleScanner
from gateway.metrics import Metrics
from gateway.qos.controller import QosController
from gateway.qos.model import QosSettings
from gateway.qos.shares import FairShares, ShareLimits
from gateway.qos.store import QosStore, store_path
from gateway.qos.utilization import DeviceUtilization
from gateway.service.backend_watch import BackendWatch
from gateway.service.objects import ObjectService


@dataclass
class Components:
    """Everything one gateway process runs; started and stopped by the app lifespan."""

    settings: Settings
    credentials: Credentials
    backend: Backend  # the top of the stack (the cache tier when there is one)
    service: ObjectService
    metrics: Metrics
    cache: CacheTier | None = None
    cost: CostMeter | None = None
    throttle: ThrottledBackend | None = None
    store: Backend | None = None  # the persistent backend itself, below every wrapper
    cluster: ClusterNode | None = None
    lifecycle: LifecycleScanner | None = None
    watch: BackendWatch | None = None  # reachability of a networked store
    qos: QosController = field(default_factory=lambda: QosController(QosSettings()))
    shares: FairShares | None = None  # per-user limits of S3 requests (fair shares)
    started: float = field(default_factory=time.time)
    ready: bool = False

    async def start(self) -> None:
        if self.watch is not None:
            await self.watch.start()
        if self.cache is not None:
            await self.cache.start()
            if self.watch is not None:
                self.watch.listeners.append(self.cache.backend_reachable)
            pace = self.qos.pace_flush
            # (a cluster member flushes only once it knows it is still a member)
            self.cache.pace_flushes(pace if self.cluster is None
                                    else self.cluster.gate_flushes(pace))
        await self.qos.start()
        if self.cost is not None:
            await self.cost.start()
        if self.cluster is not None:
            await self.cluster.start()
        if self.lifecycle is not None:
            await self.lifecycle.start()
        self.ready = True

    async def stop(self) -> None:
        self.ready = False
        await self.qos.stop()
        if self.lifecycle is not None:
            await self.lifecycle.stop()
        if self.cost is not None:
            await self.cost.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        if self.watch is not None:
            await self.watch.stop()
        await self.backend.aclose()

    def status(self) -> dict[str, Any]:
        spec = self.settings.backend_spec
        status: dict[str, Any] = {
            "ready": self.ready,
            "uptime_s": round(time.time() - self.started, 3),
            "backend": {"kind": spec.kind, "args": spec.args,
                        **(self.watch.status() if self.watch is not None else {})},
            "durability": self.settings.durability,
            "cache": self.cache is not None,
        }
        if self.throttle is not None:
            status["backend_throttle"] = {
                "bandwidth_bytes_per_s": self.throttle.settings.bandwidth_bytes_per_s,
                "iops": self.throttle.settings.iops,
            }
        if isinstance(self.store, ElasticBackend):
            status["store"] = self.store.status()
        if self.cache is not None:
            status.update(self.cache.status())
        if self.cost is not None:
            status["cost_agbs"] = self.cost.cost_agbs()
            status["cost"] = self.cost.status()
        if self.cluster is not None:
            view = self.cluster.view
            status["cluster"] = {"member": self.cluster.name, "members": len(view.members),
                                 "revision": view.revision,
                                 "serving": self.cluster.membership.serving()}
        if self.lifecycle is not None:
            status["lifecycle"] = self.lifecycle.status()
        if self.qos.states:
            status["qos"] = self.qos.status()
        if self.shares is not None:
            status["fair_shares"] = self.shares.status()
        # Requests answered 503 SlowDown by this process, whatever refused them.
        status["slowdowns"] = self.metrics.slowdowns
        status["connections_refused"] = self.metrics.connections_refused
        return status


def fair_shares(settings: Settings) -> FairShares:
    """The per-user limits of S3 requests (a user's own, set with ``squall user limit``,
    apply even where the settings turn the gateway's off)."""
    limits = ShareLimits(max_requests=settings.user_max_requests,
                         max_rate=settings.user_max_rate,
                         max_bandwidth=settings.user_max_bandwidth)
    return FairShares(limits, process_max=settings.max_requests or None)


def elastic_settings(settings: Settings) -> ElasticSettings | None:
    """The elastic capacity settings (``cache_mode = "elastic"``), else None."""
    if settings.cache_mode != "elastic":
        return None
    if settings.cache_volumes is not None:
        raise ValueError("cache_volumes cannot be combined with cache_mode = elastic "
                         "(elastic volumes are created under cache_volume_root)")
    initial = settings.cache_size
    if not initial:
        raise ValueError("cache_mode = elastic needs --cache-size > 0 (the first volume)")
    return ElasticSettings(
        root=settings.cache_volume_root or settings.data_dir / "volumes",
        initial_size_bytes=initial, min_size_bytes=settings.cache_min_size,
        max_size_bytes=settings.cache_max_size,
        volume_bandwidth_bytes_per_s=settings.cache_volume_bandwidth)


def cache_settings(settings: Settings) -> CacheSettings:
    if settings.cache_mode == "elastic":
        volumes = []  # attached at run time
    elif settings.cache_volumes is not None:
        volumes = [v for v in settings.cache_volumes if v.capacity_bytes]
    else:
        capacity = settings.cache_size
        volume_dir = settings.cache_dir or settings.data_dir / "cache"
        volumes = [CacheVolumeSettings(path=volume_dir, capacity_bytes=capacity)] \
            if capacity else []
    return CacheSettings(volumes=volumes, durability=settings.durability,
                         direct_io=settings.direct_io,
                         max_dirty_age_s=settings.max_dirty_age,
                         utilization_threshold=settings.utilization_threshold,
                         inactivity_delay_s=settings.inactivity_delay,
                         flush_concurrency=settings.flush_concurrency,
                         admission=settings.cache_admission)


def build_components(settings: Settings, credentials: Credentials, *,
                     host_worker: tuple[int, int] = (0, 1)) -> Components:
    """Build the stack; ValueError with a readable message for bad settings.
    ``host_worker``: (this worker, workers per host) of a cluster of hosts that run
    ``--workers N`` (docs/workers.md)."""
    metrics = Metrics()
    spec = settings.backend_spec
    backend: Backend = create_backend(spec.kind, spec.args, BackendOptions(
        data_dir=settings.data_dir, durability=settings.durability,
        min_part_size=settings.min_part_size, direct_io=settings.direct_io))
    store = backend
    if isinstance(store, ElasticBackend):
        store.register_metrics(metrics.registry)
    throttle = None
    bandwidth = settings.backend_bandwidth
    if bandwidth or settings.backend_iops:
        throttle = ThrottledBackend(backend, ThrottleSettings(
            bandwidth_bytes_per_s=bandwidth, iops=settings.backend_iops))
        backend = throttle
    cache = None
    caching = cache_settings(settings)
    elastic = elastic_settings(settings)
    if caching.enabled or elastic is not None:
        cache = CacheTier(backend, caching, index_path=settings.data_dir / "index",
                          registry=metrics.registry, backend_bandwidth=bandwidth,
                          backend_estimate=settings.backend_bandwidth_estimate,
                          min_part_size=settings.min_part_size,
                          provisioner=LocalProvisioner(elastic.root) if elastic else None,
                          elastic=elastic,
                          backend_devices=store.devices() if isinstance(store, LocalBackend)
                          else frozenset())
        backend = cache
    qos = QosController(settings.qos, store=QosStore(store_path(settings.data_dir,
                                                               settings.workers)),
                        share=1 / settings.workers, utilization=DeviceUtilization(
                            throttle, cache.status if cache is not None else None,
                            settings.cost_cache_bandwidth_mb_s * 1e6 or
                            (elastic.volume_bandwidth_bytes_per_s if elastic else None)))
    qos.register_metrics(metrics.registry)
    cost = None
    if cache is not None:
        tier = cache
        volume_bandwidth = elastic.volume_bandwidth_bytes_per_s if elastic else None
        cost = CostMeter(lambda: sample_from_status(tier.status()),
                         backend_bandwidth_mb_s=(settings.backend_bandwidth_estimate
                                                 or bandwidth or 0) / 1e6,
                         backend_size_gb=settings.cost_backend_size_gb,
                         cache_bandwidth_mb_s=settings.cost_cache_bandwidth_mb_s
                         or (volume_bandwidth or 0) / 1e6)
        cost.qos_reserved_mb = qos.reserved_mb
        cost.register_metrics(metrics.registry)
        tier.volume_listeners.append(cost.sample_once)  # M(t) changes: sample at once
    cluster = None
    clustering = settings.clustering(host_worker)
    if clustering is not None:
        cluster = ClusterNode(clustering, backend, cache, registry=metrics.registry)
        backend = cluster.backend
    service = ObjectService(backend)
    lifecycle = LifecycleScanner(service, interval=settings.lifecycle_interval,
                                 day_seconds=settings.lifecycle_day_seconds,
                                 owns=cluster.owns if cluster is not None
                                 else lambda b, k: True,
                                 registry=metrics.registry)
    components = Components(settings=settings, credentials=credentials, backend=backend,
                            service=service, metrics=metrics, cache=cache,
                            cost=cost, throttle=throttle, cluster=cluster,
                            store=store, lifecycle=lifecycle, qos=qos,
                            watch=BackendWatch(store, interval_s=settings.backend_probe_interval)
                            if isinstance(store, ProbedBackend) else None,
                            shares=fair_shares(settings))
    return components
