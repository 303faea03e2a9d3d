"""Prometheus metrics on a per-application registry (no module-level singletons)."""

from __future__ import annotations

import time
from collections import deque
from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

RECENT_ERRORS = 50  # kept for the dashboard (``/_squall/ui``)


class RecentError(NamedTuple):
    """One S3 error answered by this process."""

    time: float  # epoch seconds
    operation: str
    resource: str  # /bucket/key
    code: str
    status: int


class Metrics:
    """Request metrics; components register their own on :attr:`registry`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter("squall_requests", "S3 requests handled",
                                 ["operation", "status"], registry=self.registry)
        self._latency = Histogram("squall_request_seconds", "S3 request latency (to headers)",
                                  ["operation"], registry=self.registry,
                                  buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                           0.5, 1, 2.5, 5, 10, 30))
        self._slowdowns = Counter("squall_slowdowns", "Requests refused with 503 SlowDown "
                                  "(full cache or backend, concurrency limit)",
                                  registry=self.registry)
        #: requests refused with SlowDown so far (``/_squall/status`` "slowdowns")
        self.slowdowns = 0
        self._refused = Counter("squall_connections_refused", "Connections closed at once "
                                "(max_connections, max_connections_per_client)",
                                registry=self.registry)
        #: connections refused so far (``/_squall/status`` "connections_refused")
        self.connections_refused = 0
        #: the last :data:`RECENT_ERRORS` S3 error responses, oldest first
        self.recent_errors: deque[RecentError] = deque(maxlen=RECENT_ERRORS)
        #: S3 error responses so far
        self.errors_total = 0

    def observe_request(self, operation: str, status: int, seconds: float) -> None:
        self._requests.labels(operation, str(status)).inc()
        self._latency.labels(operation).observe(seconds)

    def record_error(self, operation: str, resource: str, code: str, status: int) -> None:
        """An S3 request was answered with an error (called on the error path only)."""
        self.errors_total += 1
        self.recent_errors.append(RecentError(time.time(), operation, resource, code, status))

    def count_slowdown(self) -> None:
        """A request was answered 503 SlowDown, whatever refused it."""
        self.slowdowns += 1
        self._slowdowns.inc()

    def count_connection_refused(self) -> None:
        """A new connection was closed at once: no slot for it."""
        self.connections_refused += 1
        self._refused.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
