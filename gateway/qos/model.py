"""QoS classes and the ``[qos]`` settings table (docs/qos.md, "Settings").

A class gives a bucket, or a user's requests, gears G_n = 2^n x G0 (n = 0..max_gear) of
bandwidth and, if ``g0_iops`` is set, of operations per second. The controller names a
user's class ``user:NAME`` (a bucket name never holds a colon).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from backends.core.unit_types import Duration, Rate

MAX_GEAR = 16  # 2^16 x G0: far above any device; bounds the doubling
USER_PREFIX = "user:"


def user_class(name: str) -> str:
    """The class name of user ``name``'s requests."""
    return USER_PREFIX + name


def split_class(name: str) -> tuple[str, str]:
    """``("bucket", BUCKET)`` or ``("user", NAME)`` for a class name."""
    if name.startswith(USER_PREFIX):
        return "user", name[len(USER_PREFIX):]
    return "bucket", name


class QosClass(BaseModel):
    """One bucket's or one user's QoS class."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: G0 bandwidth in bytes/s (the config file and CLI take "10MB/s", "64MiB/s" ...).
    g0_bandwidth: Rate
    #: G0 operations per second; None: operations are not limited.
    g0_iops: float | None = Field(default=None, gt=0)
    #: the highest gear n (0: a static cap at G0).
    max_gear: int = Field(default=3, ge=0, le=MAX_GEAR)
    #: promote when use >= threshold x the current gear's cap (seed: 0.95).
    threshold: float = Field(default=0.95, gt=0, le=1)
    #: promote only while the device's utilization is below this (seed Algorithm 3).
    device_threshold: float = Field(default=0.9, gt=0, le=1)
    #: demote after use stayed below the lower gear's cap for this many intervals
    #: (seed: 1, one level per interval).
    demote_after: int = Field(default=1, ge=1, le=3600)
    #: set: no gears but a leaky-bucket credit scheme (EBS gp2): credits earned at G0
    #: while use is below it, held up to this many seconds of G0, spent to burst up to
    #: the top gear's cap; billed at G0. None: G-states.
    credit_s: float | None = Field(default=None, gt=0, le=86400)

    @property
    def credit(self) -> bool:
        """True when the class runs the credit scheme instead of gears."""
        return self.credit_s is not None

    def bandwidth_cap(self, gear: int, share: float = 1.0) -> float:
        """Bytes/s at gear ``gear`` (times ``share``, a worker's part of the class)."""
        return self.g0_bandwidth * share * float(2 ** gear)

    def iops_cap(self, gear: int, share: float = 1.0) -> float | None:
        """Operations/s at gear ``gear``, None when operations are not limited."""
        return None if self.g0_iops is None else self.g0_iops * share * float(2 ** gear)


class QosSettings(BaseModel):
    """The ``[qos]`` table of the config file; ``[qos.buckets.NAME]`` and
    ``[qos.users.NAME]`` are classes."""

    model_config = ConfigDict(extra="forbid")

    #: seconds between two tuning decisions (seed: 1 s).
    interval: Duration = Field(default=1.0, gt=0, le=60)
    #: seconds over which a class's arrival rate is averaged (a few intervals: a steady
    #: load of large objects reads its mean, not one or two objects per interval).
    window: Duration = Field(default=3.0, gt=0, le=600)
    #: longest wait of a request for its class's tokens; beyond: 503 SlowDown.
    max_wait: Duration = Field(default=2.0, ge=0, le=60)
    #: token bucket depth in seconds of the cap (what passes as one burst).
    burst: Duration = Field(default=0.1, gt=0, le=10)
    buckets: dict[str, QosClass] = Field(default_factory=dict)
    users: dict[str, QosClass] = Field(default_factory=dict)

    def classes(self) -> dict[str, QosClass]:
        """Every class of the file by class name (users as ``user:NAME``)."""
        return {**self.buckets, **{user_class(n): c for n, c in self.users.items()}}
