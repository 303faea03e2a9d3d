"""The cache tier's counters (exported by ``CacheTier.status()`` and its metrics)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Stats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0
    read_copies_total: int = 0  # read misses whose copy was kept in the cache
    flush_bytes_total: int = 0
    flushes_total: int = 0
    flush_errors_total: int = 0
    ingest_bytes_total: int = 0  # bytes accepted from clients (cache or write-around)
    backend_client_bytes_total: int = 0  # backend traffic caused by clients, not flushes
    writearound_bytes_total: int = 0
    slowdowns_total: int = 0
    forced_flush_bytes_total: int = 0  # flushed in phase 1 only to make room
    diverted_bytes_total: int = 0  # written around because the cache was full
