"""The cost meter: samples the cache tier and accumulates C(t) while the gateway runs.

Every ``interval_s`` (5 s, as in the seed's section IV-C) it records a :class:`CostSample`
(cache size M(t) = the capacity currently attached, used and dirty bytes, ingest rate) and
adds the interval's share of the adjusted storage accumulation (section III-B)::

    C(t) = nodes * (B_b * N * t + B_c * integral_0^t M(x) dx)       [AGBs]

where N is the *size* of the backing device in GB (the seed's N), B_b and B_c the
bandwidths in MB/s, and ``nodes`` the number of identical gateway instances summed into
C_a (1 for a single gateway). The integral uses the trapezoid rule between samples.
The time series is kept for ``retention_s`` (24 h by default); the accumulated cost is not
affected by that trimming.
"""

from __future__ import annotations

import csv
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.background import PeriodicTask
from gateway.cost import model

log = logging.getLogger(__name__)

STATUS_SERIES_POINTS = 720  # one hour at the default interval


@dataclass(frozen=True, slots=True)
class CostSample:
    """What the meter reads from the cache tier at one instant."""

    cache_size_bytes: int  # M(t): capacity attached (0 when no cache device is attached)
    cache_used_bytes: int = 0
    dirty_bytes: int = 0
    ingest_rate_bytes_per_s: float = 0.0


@dataclass(frozen=True, slots=True)
class MeterPoint:
    """One row of the meter's time series."""

    at: float  # clock value (seconds; wall-clock epoch by default)
    elapsed_s: float  # since the first sample
    sample: CostSample
    cost_agbs: float  # accumulated C(t) at this point


def sample_from_status(status: Mapping[str, Any]) -> CostSample:
    """Build a sample from ``CacheTier.status()``."""
    return CostSample(cache_size_bytes=int(status.get("cache_capacity_bytes") or 0),
                      cache_used_bytes=int(status.get("cache_used_bytes") or 0),
                      dirty_bytes=int(status.get("dirty_bytes") or 0),
                      ingest_rate_bytes_per_s=float(
                          status.get("ingest_rate_bytes_per_s") or 0.0))


class CostMeter:
    """Accumulates the adjusted storage accumulation of one gateway (seed III-B)."""

    def __init__(self, sample: Callable[[], CostSample], *, interval_s: float = 5.0,
                 backend_bandwidth_mb_s: float, backend_size_gb: float,
                 cache_bandwidth_mb_s: float, nodes: int = 1,
                 retention_s: float = 24 * 3600.0,
                 clock: Callable[[], float] = time.time) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        if nodes < 1:
            raise ValueError("nodes must be >= 1")
        for name, value in (("backend_bandwidth_mb_s", backend_bandwidth_mb_s),
                            ("backend_size_gb", backend_size_gb),
                            ("cache_bandwidth_mb_s", cache_bandwidth_mb_s)):
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0")
        self._sample = sample
        self.interval_s = interval_s
        self.backend_bandwidth_mb_s = backend_bandwidth_mb_s
        self.backend_size_gb = backend_size_gb
        self.cache_bandwidth_mb_s = cache_bandwidth_mb_s
        self.nodes = nodes
        self._clock = clock
        self._points: deque[MeterPoint] = deque(maxlen=max(2, int(retention_s / interval_s) + 1))
        self._first: float | None = None
        self._last: MeterPoint | None = None
        self._cache_gb_s = 0.0  # integral of M(x) dx so far, in GB*s
        self._loop = PeriodicTask(self._safe_sample, every=lambda: self.interval_s,
                                  name="squall-cost-meter")
        #: per bucket, the integral of its QoS class's reserved bandwidth in MB (the
        #: QoS controller's ``reserved_mb``); None: no QoS classes are billed
        self.qos_reserved_mb: Callable[[], Mapping[str, float]] | None = None

    # -- accumulation ----------------------------------------------------------------
    def sample_once(self) -> MeterPoint:
        """Take one sample now and add the interval since the previous one."""
        now = self._clock()
        current = self._sample()
        if self._first is None or self._last is None:
            self._first = now
        else:
            dt = max(0.0, now - self._last.at)  # a clock stepping back adds nothing
            m0 = model.gb(self._last.sample.cache_size_bytes)
            m1 = model.gb(current.cache_size_bytes)
            self._cache_gb_s += model.integrate_size([(0.0, m0), (dt, m1)])
        point = MeterPoint(at=now, elapsed_s=self._elapsed(now), sample=current,
                           cost_agbs=self._cost(self._elapsed(now)))
        self._points.append(point)
        self._last = point
        return point

    def _elapsed(self, now: float) -> float:
        if self._first is None or self._last is None:
            return 0.0
        return self._last.elapsed_s + max(0.0, now - self._last.at)

    def _cost(self, elapsed_s: float) -> float:
        return self.nodes * model.adjusted_storage_accumulation(
            backend_bandwidth_mb_s=self.backend_bandwidth_mb_s,
            backend_size_gb=self.backend_size_gb, seconds=elapsed_s,
            cache_bandwidth_mb_s=self.cache_bandwidth_mb_s,
            cache_gb_seconds=self._cache_gb_s)

    def cost_agbs(self) -> float:
        """C(t) up to the last sample, in AGBs (0 before two samples)."""
        return self._last.cost_agbs if self._last else 0.0

    def backend_agbs(self) -> float:
        elapsed = self._last.elapsed_s if self._last else 0.0
        return self.nodes * self.backend_bandwidth_mb_s * self.backend_size_gb * elapsed

    def cache_agbs(self) -> float:
        return self.nodes * self.cache_bandwidth_mb_s * self._cache_gb_s

    def qos_buckets_agbs(self) -> dict[str, float]:
        """The QoS bill per bucket: a second at gear n costs 2^n x G0 (MB/s) x N (GB)
        AGBs, the price of the backend's own B_b x N (docs/qos.md, "Billing")."""
        if self.qos_reserved_mb is None:
            return {}
        return {bucket: mb * self.backend_size_gb
                for bucket, mb in self.qos_reserved_mb().items()}

    def qos_agbs(self) -> float:
        """The QoS bill of every class so far, in AGBs (not part of C(t))."""
        return sum(self.qos_buckets_agbs().values())

    def points(self) -> list[MeterPoint]:
        """The retained time series, oldest first."""
        return list(self._points)

    # -- lifespan --------------------------------------------------------------------
    async def start(self) -> None:
        """Start sampling in a background task (call from the application lifespan)."""
        self._loop.start()

    async def stop(self) -> None:
        """Stop sampling; takes a last sample so the total covers the whole run."""
        if self._loop.running:
            await self._loop.stop()
            self._safe_sample()

    def _safe_sample(self) -> None:
        try:
            self.sample_once()
        except Exception:  # a failing probe must not stop metering or the gateway
            log.exception("cost meter: sampling failed")

    # -- output ----------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The ``cost`` object of ``/_squall/status`` (documented in docs/cost-model.md)."""
        last = self._last
        series = list(self._points)[-STATUS_SERIES_POINTS:]
        return {
            "unit": "AGBs",
            "agbs": self.cost_agbs(),
            "backend_agbs": self.backend_agbs(),
            "cache_agbs": self.cache_agbs(),
            "cache_gb_seconds": self._cache_gb_s,
            "elapsed_s": last.elapsed_s if last else 0.0,
            "samples": len(self._points),
            "interval_s": self.interval_s,
            "backend_bandwidth_mb_s": self.backend_bandwidth_mb_s,
            "backend_size_gb": self.backend_size_gb,
            "cache_bandwidth_mb_s": self.cache_bandwidth_mb_s,
            "nodes": self.nodes,
            "cache_size_bytes": last.sample.cache_size_bytes if last else 0,
            **({"qos_agbs": self.qos_agbs(), "qos_buckets_agbs": self.qos_buckets_agbs()}
               if self.qos_reserved_mb is not None else {}),
            "series": {
                "elapsed_s": [p.elapsed_s for p in series],
                "cache_size_bytes": [p.sample.cache_size_bytes for p in series],
                "cache_used_bytes": [p.sample.cache_used_bytes for p in series],
                "dirty_bytes": [p.sample.dirty_bytes for p in series],
                "ingest_rate_bytes_per_s": [p.sample.ingest_rate_bytes_per_s for p in series],
                "cost_agbs": [p.cost_agbs for p in series],
            },
        }

    def report(self) -> str:
        """A short text report of the accumulated cost."""
        return format_report(self.status())

    def to_csv(self, path: Path) -> None:
        """Write the retained series as CSV (temporary file, then rename)."""
        write_csv(path, self.status()["series"])

    def register_metrics(self, registry: Any) -> None:
        """Export gauges on a prometheus ``CollectorRegistry``."""
        from prometheus_client import Gauge

        for name, doc, fn in (
                ("squall_cost_agbs", "adjusted storage accumulation C(t) so far (AGBs)",
                 self.cost_agbs),
                ("squall_cost_backend_agbs", "backend share B_b*N*t of C(t) (AGBs)",
                 self.backend_agbs),
                ("squall_cost_cache_agbs", "cache share B_c*integral M(x)dx of C(t) (AGBs)",
                 self.cache_agbs),
                ("squall_cost_qos_agbs", "QoS gears billed so far, besides C(t) (AGBs)",
                 self.qos_agbs)):
            Gauge(name, doc, registry=registry).set_function(fn)


SERIES_COLUMNS = ("elapsed_s", "cache_size_bytes", "cache_used_bytes", "dirty_bytes",
                  "ingest_rate_bytes_per_s", "cost_agbs")


def write_csv(path: Path, series: Mapping[str, list[Any]]) -> None:
    """Write a ``series`` object (column -> values) as CSV with a header row."""
    columns = [series.get(c, []) for c in SERIES_COLUMNS]
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SERIES_COLUMNS)
        writer.writerows(zip(*columns, strict=True))
    tmp.replace(path)


def format_report(cost: Mapping[str, Any]) -> str:
    """Render the ``cost`` status object as text."""
    elapsed = float(cost.get("elapsed_s", 0.0))
    agbs = float(cost["agbs"])
    lines = [
        (f"adjusted storage accumulation C(t): {agbs:,.1f} AGBs over {elapsed:,.0f} s "
         f"({int(cost.get('samples', 0))} samples, "
         f"every {float(cost.get('interval_s', 0)):g} s)"),
        (f"  backend  B_b*N*t        : {float(cost.get('backend_agbs', 0)):,.1f} AGBs "
         f"(B_b={float(cost.get('backend_bandwidth_mb_s', 0)):g} MB/s, "
         f"N={float(cost.get('backend_size_gb', 0)):g} GB)"),
        (f"  cache    B_c*int M(x)dx : {float(cost.get('cache_agbs', 0)):,.1f} AGBs "
         f"(B_c={float(cost.get('cache_bandwidth_mb_s', 0)):g} MB/s, "
         f"int M = {float(cost.get('cache_gb_seconds', 0)):,.1f} GB*s)"),
        f"  nodes n                 : {int(cost.get('nodes', 1))}",
        f"  cache size now M(t)     : {model.gb(float(cost.get('cache_size_bytes', 0))):g} GB",
    ]
    if elapsed > 0:
        lines.append(f"  average rate            : {agbs / elapsed:,.1f} AGBs/s")
    if "qos_agbs" in cost:
        lines.append(f"  QoS gears (besides C(t)): {float(cost['qos_agbs']):,.1f} AGBs")
        for bucket, value in sorted((cost.get("qos_buckets_agbs") or {}).items()):
            lines.append(f"    {bucket:<22}: {float(value):,.1f} AGBs")
    return "\n".join(lines)
