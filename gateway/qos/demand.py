"""A class's demand on one gate (request path or flush path), measured every interval.

The demand is the largest of three readings (docs/qos.md, "The controller"):

* **arrivals**: bytes and operations taken or refused at the gate over the last
  ``window`` seconds, per second. Averaged over several intervals so that a steady load
  of large objects reads its mean rate, not one or two objects per interval;
* **saturation**: the part of the last interval during which requests waited at the gate
  (its token bucket in debt), times the cap: a class whose clients are throttled reads its
  cap, however few requests each client keeps waiting;
* **queue**: what waits at the gate at the tick, over one interval: the rate that would
  drain a queue built at once (one large object, a flood) within the next interval.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from gateway.qos.gate import ClassGate


class GateSample(NamedTuple):
    """A gate's counters at one instant."""

    at: float
    charged_bytes: float
    charged_ops: float
    waiting_bytes: float
    waiting_ops: float
    refused_bytes: float
    refused_ops: float
    busy_bytes_s: float  # seconds the bandwidth bucket was in debt
    busy_ops_s: float  # seconds the IOPS bucket was in debt


def sample(gate: ClassGate, at: float) -> GateSample:
    """Read ``gate``'s counters (brought up to the gate's clock) at time ``at``."""
    waiting_bytes, waiting_ops = gate.backlog()
    return GateSample(at, gate.bandwidth.charged, gate.iops.charged, waiting_bytes,
                      waiting_ops, gate.refused_bytes, gate.refused, gate.bandwidth.busy,
                      gate.iops.busy)


class Use(NamedTuple):
    """One interval's admitted use and demand (per second)."""

    bandwidth: float
    iops: float
    bandwidth_demand: float
    iops_demand: float
    flush_bandwidth: float = 0.0


IDLE = Use(0.0, 0.0, 0.0, 0.0)


class DemandMeter:
    """The samples of one gate over the last ``window_s`` seconds."""

    __slots__ = ("_history", "window_s")

    def __init__(self, first: GateSample, window_s: float) -> None:
        self.window_s = window_s
        self._history: deque[GateSample] = deque([first])

    def update(self, now: GateSample, bandwidth_cap: float,
               iops_cap: float | None) -> Use:
        """Add the sample taken at a tick; the use and demand of the interval that ends
        there, given the caps held during it."""
        history = self._history
        last = history[-1]
        history.append(now)
        # Keep the newest sample at least a window old: the arrival rate spans a window.
        while len(history) > 1 and history[1].at <= now.at - self.window_s:
            history.popleft()
        dt = now.at - last.at
        if dt <= 0.0:
            return IDLE
        first = history[0]
        span = now.at - first.at
        admitted_bytes = ((now.charged_bytes - now.waiting_bytes)
                          - (last.charged_bytes - last.waiting_bytes))
        admitted_ops = ((now.charged_ops - now.waiting_ops)
                        - (last.charged_ops - last.waiting_ops))
        arrivals_bytes = (now.charged_bytes + now.refused_bytes
                          - first.charged_bytes - first.refused_bytes) / span
        arrivals_ops = (now.charged_ops + now.refused_ops
                        - first.charged_ops - first.refused_ops) / span
        saturation_bytes = (now.busy_bytes_s - last.busy_bytes_s) / dt * bandwidth_cap
        saturation_ops = ((now.busy_ops_s - last.busy_ops_s) / dt * iops_cap
                          if iops_cap is not None else 0.0)
        return Use(admitted_bytes / dt, admitted_ops / dt,
                   max(arrivals_bytes, saturation_bytes, now.waiting_bytes / dt),
                   max(arrivals_ops, saturation_ops, now.waiting_ops / dt))
