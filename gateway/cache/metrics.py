"""Prometheus export of the cache status (``squall_cache_*``), read at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# status() field -> (metric name, kind, help). Counters get "_total" appended on export.
METRICS: dict[str, tuple[str, str, str]] = {
    "dirty_bytes": ("squall_cache_dirty_bytes", "gauge", "Bytes not yet on the backend"),
    "dirty_objects": ("squall_cache_dirty_objects", "gauge",
                      "Objects and deletes not yet on the backend"),
    "cache_used_bytes": ("squall_cache_used_bytes", "gauge",
                         "Bytes used on cache volumes (data, reservations)"),
    "cache_capacity_bytes": ("squall_cache_capacity_bytes", "gauge",
                             "Capacity of all cache volumes"),
    "oldest_dirty_age_s": ("squall_cache_oldest_dirty_age_seconds", "gauge",
                           "Age of the oldest unflushed write"),
    "flush_inflight": ("squall_cache_flush_inflight", "gauge", "Flushes in progress"),
    "cache_volumes_attached": ("squall_cache_volumes_attached", "gauge",
                               "Cache volumes attached now"),
    "forced_flush_bytes_total": ("squall_cache_forced_flush_bytes", "counter",
                                 "Bytes flushed in phase 1 only to make room"),
    "flush_bytes_total": ("squall_cache_flush_bytes", "counter",
                          "Bytes streamed to the backend by the flusher"),
    "flushes_total": ("squall_cache_flushes", "counter", "Flushes confirmed by the backend"),
    "flush_errors_total": ("squall_cache_flush_errors", "counter", "Failed flush attempts"),
    "ingest_bytes_total": ("squall_cache_ingest_bytes", "counter",
                           "Bytes written by clients (cached or written around)"),
    "writearound_bytes_total": ("squall_cache_writearound_bytes", "counter",
                                "Bytes written straight to the backend"),
    "diverted_bytes_total": ("squall_cache_diverted_bytes", "counter",
                             "Bytes written to the backend because the cache was full"),
    "hits": ("squall_cache_hits", "counter", "Reads served from the cache"),
    "misses": ("squall_cache_misses", "counter", "Reads served from the backend"),
    "evictions": ("squall_cache_evictions", "counter", "Clean objects evicted"),
    "read_copies_total": ("squall_cache_read_copies", "counter",
                          "Read misses whose copy was kept in the cache"),
    "slowdowns": ("squall_cache_slowdowns", "counter", "Writes refused with SlowDown"),
    "quarantined_objects": ("squall_cache_quarantined_objects", "gauge",
                            "Unflushed records the backend refuses for good (retried rarely)"),
}
PHASES = ("idle", "phase1", "phase2")


class _StatusCollector(Collector):
    def __init__(self, status: Callable[[], dict[str, Any]]) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        status = self._status()
        for field, (name, kind, doc) in METRICS.items():
            family: Metric
            if kind == "counter":
                family = CounterMetricFamily(name, doc, value=float(status[field]))
            else:
                family = GaugeMetricFamily(name, doc, value=float(status[field]))
            yield family
        phase = GaugeMetricFamily("squall_cache_flush_phase",
                                  "Writeback phase (1 for the current one)", labels=["phase"])
        for name in PHASES:
            phase.add_metric([name], 1.0 if status["flush_phase"] == name else 0.0)
        yield phase

    def describe(self) -> Iterator[Metric]:
        return iter(())


def register_metrics(registry: CollectorRegistry, status: Callable[[], dict[str, Any]]) -> None:
    """Export ``status()`` on ``registry`` (once per registry)."""
    registry.register(_StatusCollector(status))
