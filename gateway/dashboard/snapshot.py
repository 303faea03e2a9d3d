"""One process's dashboard data: the essentials of its status, rates and recent errors.

The document (``GET /_squall/ui/data``, format 1) is described in docs/dashboard.md. It
is built from :meth:`Components.status` on request (the admin path, not the S3 one);
rates are measured between requests at least :data:`RATE_WINDOW_S` apart, so they do not
depend on how many pages or ``squall top`` poll.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.components import Components

FORMAT = 1
RATE_WINDOW_S = 1.0
RATE_COUNTERS = {"ingest_bytes_per_s": "ingest_bytes_total",
                 "flush_bytes_per_s": "flush_bytes_total",
                 "writearound_bytes_per_s": "writearound_bytes_total"}
_CACHE_FIELDS = ("dirty_bytes", "dirty_objects", "oldest_dirty_age_s", "flush_inflight",
                 "quarantined_objects", "uploads", "ingest_bytes_total", "flush_bytes_total",
                 "writearound_bytes_total", "flush_errors_total")
_COST_FIELDS = ("unit", "agbs", "backend_agbs", "cache_agbs", "elapsed_s")


@dataclass(slots=True)
class RateMeter:
    """Byte rates from counters sampled no more often than every ``window_s``."""

    window_s: float = RATE_WINDOW_S
    clock: Callable[[], float] = time.monotonic
    _last: tuple[float, dict[str, int]] | None = None
    _rates: dict[str, float | None] = field(
        default_factory=lambda: dict.fromkeys(RATE_COUNTERS))

    def update(self, counters: dict[str, int]) -> dict[str, float | None]:
        """The rates (None until two samples ``window_s`` apart were taken)."""
        now = self.clock()
        if self._last is None:
            self._last = (now, counters)
        elif now - self._last[0] >= self.window_s:
            then, before = self._last
            self._rates = {rate: max(0.0, (counters[total] - before[total]) / (now - then))
                           for rate, total in RATE_COUNTERS.items()}
            self._last = (now, counters)
        return dict(self._rates)


class ProcessView:
    """The dashboard document of one gateway process."""

    def __init__(self, components: Components) -> None:
        self._components = components
        self._rates = RateMeter()

    def data(self) -> dict[str, Any]:
        components = self._components
        status = components.status()
        cache = _cache(status) if status.get("cache") else None
        rates = self._rates.update({t: int(status.get(t, 0)) for t in RATE_COUNTERS.values()}) \
            if cache is not None else dict.fromkeys(RATE_COUNTERS)
        backend = status.get("backend", {})
        metrics = components.metrics
        members: list[dict[str, Any]] = []
        if components.cluster is not None:
            ring = components.cluster.describe()["members"]
            members = [{"name": m["name"], "health": m["state"], "self": m["self"],
                        "key_share": 1 / len(ring), "error": None} for m in ring]
        cost = status.get("cost")
        return {
            "format": FORMAT,
            "time": time.time(),
            "ready": status["ready"],
            "uptime_s": status["uptime_s"],
            "workers": 1,
            "backend": {"kind": backend.get("kind"), "reachable": backend.get("reachable", True),
                        "reason": backend.get("reason")},
            "cache": cache,
            "rates": rates,
            "cost": {k: cost.get(k) for k in _COST_FIELDS} if cost else None,
            "qos": status.get("qos"),
            "members": members,
            "errors": [e._asdict() for e in reversed(metrics.recent_errors)],
            "errors_total": metrics.errors_total,
            "slowdowns": status.get("slowdowns", 0),
        }


def _cache(status: dict[str, Any]) -> dict[str, Any]:
    elastic = status.get("elastic")
    return {
        "mode": status.get("cache_mode", "static"),
        "phase": status.get("flush_phase", "idle"),
        "used_bytes": status.get("cache_used_bytes", 0),
        "capacity_bytes": status.get("cache_capacity_bytes", 0),
        **{name: status.get(name, 0) for name in _CACHE_FIELDS},
        "elastic_state": elastic.get("state") if elastic else None,
        "volumes": [{k: v.get(k) for k in ("id", "provider", "size_bytes", "used_bytes",
                                             "state")}
                    for v in status.get("cache_volumes", [])],
    }
