"""Prometheus metrics of a store, read from its counters at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector as PromCollector

from backends.blobseer_like.gc import Collector
from backends.blobseer_like.store import BlobStore


class StoreMetrics(PromCollector):
    """``squall_blobseer_*``: providers, per-provider bytes, bursts, commits, collection."""

    def __init__(self, store: BlobStore, gc: Collector) -> None:
        self._store = store
        self._gc = gc

    def collect(self) -> Iterator[Metric]:
        pool = self._store.pool
        providers = GaugeMetricFamily("squall_blobseer_providers",
                                      "Providers of the store by state", labels=["state"])
        for state in ("active", "standby"):
            providers.add_metric([state], sum(1 for p in pool.by_id.values()
                                              if p.state == state))
        yield providers
        moved = CounterMetricFamily("squall_blobseer_provider_bytes",
                                    "Chunk bytes written to and read from each provider",
                                    labels=["provider", "direction"])
        for provider in pool.by_id.values():
            moved.add_metric([provider.id, "write"], provider.bytes_written)
            moved.add_metric([provider.id, "read"], provider.bytes_read)
        yield moved
        yield CounterMetricFamily("squall_blobseer_burst_activations",
                                  "Standby providers activated because ingest exceeded the "
                                  "burst threshold", value=pool.stats.activations)
        yield CounterMetricFamily("squall_blobseer_providers_added",
                                  "Providers added while running", value=pool.stats.added)
        yield GaugeMetricFamily("squall_blobseer_ingest_bytes_per_second",
                                "Chunk ingest rate over the last burst window",
                                value=pool.stats.ingest_rate)
        yield CounterMetricFamily("squall_blobseer_commits", "Versions and tombstones committed",
                                  value=self._store.commits)
        yield CounterMetricFamily("squall_blobseer_gc_passes", "Garbage collection passes",
                                  value=self._gc.passes)
        removed = CounterMetricFamily("squall_blobseer_gc_removed",
                                      "Files removed by garbage collection", labels=["kind"])
        removed.add_metric(["chunk"], self._gc.total.chunks)
        removed.add_metric(["record"], self._gc.total.records)
        removed.add_metric(["upload"], self._gc.total.uploads)
        yield removed
