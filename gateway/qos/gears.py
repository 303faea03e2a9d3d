"""The tuning decision of one class (seed: IOTune, Algorithm 3), as a pure state machine.

Every interval ``tick`` is given the interval's length, the class's measured use and the
device's utilization; it bills the interval at the gear held during it, then promotes,
demotes or holds. No clock, no I/O: scripted traces test it directly.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from gateway.qos.model import QosClass


class Tuning(enum.Enum):
    HOLD = "hold"
    PROMOTE = "promote"
    DEMOTE = "demote"
    VETOED = "vetoed"  # would promote, but the device is above its utilization threshold


@dataclass
class GearState:
    """The gear of one class and what it has been billed."""

    spec: QosClass
    share: float = 1.0  # this process's part of the class (1/N of N workers)
    gear: int = 0
    low_intervals: int = 0  # consecutive intervals below the lower gear's cap
    #: G0-equivalent seconds: a second at gear n counts 2^n (the bill, docs/qos.md)
    gear_seconds: float = 0.0
    seconds_at_gear: list[float] = field(default_factory=list)
    #: integral of the reserved bandwidth (the cap held), in MB: what the bill prices
    reserved_mb: float = 0.0

    def __post_init__(self) -> None:
        self.seconds_at_gear += [0.0] * (self.spec.max_gear + 1 - len(self.seconds_at_gear))

    @property
    def bandwidth_cap(self) -> float:
        return self.spec.bandwidth_cap(self.gear, self.share)

    @property
    def iops_cap(self) -> float | None:
        return self.spec.iops_cap(self.gear, self.share)

    def gate_caps(self) -> tuple[float, float | None]:
        """The caps the gates enforce: the gear's, or the peak of a credit class."""
        spec = self.spec
        if spec.credit:
            return (spec.bandwidth_cap(spec.max_gear, self.share),
                    spec.iops_cap(spec.max_gear, self.share))
        return self.bandwidth_cap, self.iops_cap

    def credit(self) -> tuple[float, float | None, float] | None:
        """A credit class's baseline bandwidth, IOPS and credit depth (s); else None."""
        spec = self.spec
        if spec.credit_s is None:
            return None
        return self.bandwidth_cap, self.iops_cap, spec.credit_s

    def respec(self, spec: QosClass) -> None:
        """A new class for the same bucket: keep the bill, clamp the gear."""
        self.spec = spec
        self.gear = 0 if spec.credit else min(self.gear, spec.max_gear)
        self.low_intervals = 0
        self.seconds_at_gear += [0.0] * (spec.max_gear + 1 - len(self.seconds_at_gear))

    def _reaches(self, used: float, cap: float | None, share: float) -> bool:
        return cap is not None and used >= share * cap

    def tick(self, dt: float, bandwidth_used: float, iops_used: float,
             utilization: float) -> Tuning:
        """Bill ``dt`` seconds at the current gear, then decide from the interval's
        demand (bytes/s, operations/s: admitted, waiting or refused) and the device's
        utilization (0..1, busiest device). A credit class stays at gear 0 (its bill)."""
        dt = max(0.0, dt)
        self.gear_seconds += 2 ** self.gear * dt
        self.reserved_mb += self.bandwidth_cap / 1e6 * dt
        self.seconds_at_gear[self.gear] += dt
        spec = self.spec
        if spec.credit:
            return Tuning.HOLD
        saturated = (self._reaches(bandwidth_used, self.bandwidth_cap, spec.threshold)
                     or self._reaches(iops_used, self.iops_cap, spec.threshold))
        if saturated and self.gear < spec.max_gear:
            self.low_intervals = 0
            if utilization >= spec.device_threshold:
                return Tuning.VETOED
            self.gear += 1
            return Tuning.PROMOTE
        if self.gear > 0:
            lower_bw = spec.bandwidth_cap(self.gear - 1, self.share)
            lower_iops = spec.iops_cap(self.gear - 1, self.share)
            if bandwidth_used < lower_bw and (lower_iops is None or iops_used < lower_iops):
                self.low_intervals += 1
                if self.low_intervals >= spec.demote_after:
                    self.gear -= 1
                    self.low_intervals = 0
                    return Tuning.DEMOTE
                return Tuning.HOLD
        self.low_intervals = 0
        return Tuning.HOLD
