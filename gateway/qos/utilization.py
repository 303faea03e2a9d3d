"""The device utilization the controller's promotion veto reads (seed Algorithm 2).

Squall's devices are the backend (behind its throttle, the one place where its capacity
is known) and the cache volumes. Utilization is the busier of:

* backend: bytes sent + received per second over ``--backend-bandwidth``, and operations
  per second over ``--backend-iops`` (what ``ThrottledBackend`` counts);
* cache: the ingest rate the cache tier measures over the cache bandwidth B_c
  (``cost_cache_bandwidth_mb_s`` or ``cache_volume_bandwidth``), when it is known.

A device whose capacity is not configured counts as idle (0): nothing to veto against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from backends.throttled import ThrottledBackend


class DeviceUtilization:
    """Call with the time (monotonic seconds); returns the utilization since the last call."""

    def __init__(self, throttle: ThrottledBackend | None,
                 cache_status: Callable[[], dict[str, Any]] | None,
                 cache_bandwidth: float | None) -> None:
        self._throttle = throttle
        self._cache_status = cache_status
        self._cache_bandwidth = cache_bandwidth
        self._last: tuple[float, int, int] | None = None

    def __call__(self, now: float) -> float:
        util = 0.0
        t = self._throttle
        if t is not None:
            moved, ops = t.bytes_sent + t.bytes_received, t.operations
            if self._last is not None and now > self._last[0]:
                dt = now - self._last[0]
                if t.settings.bandwidth_bytes_per_s:
                    util = max(util, (moved - self._last[1]) / dt
                               / t.settings.bandwidth_bytes_per_s)
                if t.settings.iops:
                    util = max(util, (ops - self._last[2]) / dt / t.settings.iops)
            self._last = (now, moved, ops)
        if self._cache_status is not None and self._cache_bandwidth:
            ingest = float(self._cache_status().get("ingest_rate_bytes_per_s") or 0.0)
            util = max(util, ingest / self._cache_bandwidth)
        return util
