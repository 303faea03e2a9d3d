"""Typed settings of the cache tier (one model per component).

The composition root reads these (pydantic-settings, ``SQUALL_*`` variables, a config
file or CLI flags) and builds a :class:`~gateway.cache.tier.CacheTier` only when
:attr:`CacheSettings.enabled` is true: no volumes or zero capacity means "no cache".
Sizes and rates accept numbers or strings such as ``"1GiB"`` and ``"20MiB/s"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from backends.core.unit_types import ByteSize, Rate


class CacheVolumeSettings(BaseModel):
    """One cache volume: a directory on fast media and the bytes the cache may use there."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Path
    capacity_bytes: ByteSize = Field(ge=0)


class CacheSettings(BaseModel):
    """The write-back cache tier (see docs/cache.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    volumes: list[CacheVolumeSettings] = Field(default_factory=list)
    #: "fsync": acknowledge a write once its data and index entry are on stable storage.
    #: "none": skip both syncs (faster; a power loss or kernel crash may lose acknowledged
    #: writes, a process crash does not).
    durability: Literal["fsync", "none"] = "fsync"
    #: Data files are written past the page cache (O_DIRECT) where the volume's file
    #: system allows it (:mod:`backends.direct_io`).
    direct_io: bool = True
    #: Dirty data older than this is flushed whatever the phase (a deadline).
    max_dirty_age_s: float = Field(default=300.0, gt=0)
    #: UT: phase 2 starts once ingest stays below UT x backend bandwidth ...
    utilization_threshold: float = Field(default=0.3, gt=0, le=1)
    #: ... for ID seconds (the inactivity delay).
    inactivity_delay_s: float = Field(default=30.0, ge=0)
    flush_concurrency: int = Field(default=4, ge=1, le=256)
    chunk_size: int = Field(default=1 << 20, ge=4096, le=1 << 28)
    #: Cap of the exponential backoff between flush retries of one object.
    flush_retry_max_s: float = Field(default=30.0, gt=0)
    #: How long a write waits for room in a full cache before SlowDown.
    backpressure_timeout_s: float = Field(default=10.0, ge=0)
    #: Period of the writeback controller (ingest measurement, phase changes).
    control_interval_s: float = Field(default=0.5, gt=0)
    #: A PUT body (or part) up to this size is kept inside its index record instead of
    #: a data file: durable with the shared WAL sync alone, read from memory. 0: never.
    inline_max_bytes: int = Field(default=64 * 1024, ge=0, le=1 << 20)
    #: "auto": a write goes past the cache when the backend takes it as fast as the
    #: cache would (measured); "cache": every write that fits is cached.
    admission: Literal["auto", "cache"] = "auto"
    #: A flush the backend refuses for good (NoSuchBucket, a key or size it does not take)
    #: this many times in a row is quarantined: kept, reported, retried every ...
    quarantine_attempts: int = Field(default=5, ge=1)
    #: ... this many seconds (and at once by each `squall sync`).
    quarantine_retry_s: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _distinct_paths(self) -> CacheSettings:
        paths = [v.path.resolve() for v in self.volumes]
        if len(set(paths)) != len(paths):
            raise ValueError("cache volumes must be distinct directories")
        return self

    @property
    def capacity_bytes(self) -> int:
        return sum(v.capacity_bytes for v in self.volumes)

    @property
    def enabled(self) -> bool:
        """False when there is no cache to build (no volume, or zero capacity)."""
        return self.capacity_bytes > 0


class ElasticSettings(BaseModel):
    """Elastic cache capacity (``cache_mode = "elastic"``, docs/cache.md): a volume is
    attached by a provisioner only while a write burst lasts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: where the local provisioner creates its volume directories
    root: Path
    #: M of the first burst; later bursts are sized from experience
    initial_size_bytes: ByteSize = Field(gt=0)
    min_size_bytes: ByteSize = Field(default=1 << 20, gt=0)
    max_size_bytes: ByteSize | None = Field(default=None, gt=0)
    #: volume sizes are rounded up to a multiple of this (cloud volumes come in GiB)
    granularity_bytes: ByteSize = Field(default=1 << 20, gt=0)
    #: B_c: the reserved bandwidth of a volume (writes are capped to it); None: uncapped
    volume_bandwidth_bytes_per_s: Rate | None = None
    #: after a failed attach, writes go to the backend for this long before a new try
    retry_s: float = Field(default=5.0, ge=0)
