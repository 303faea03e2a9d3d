"""Calibration tables B_M(x), D_M(x) and P_M(x) (seed: adaptive caching, III-C and III-D).

B_M(x) is the sustained throughput (MB/s) for writing a dataset of x GB with a cache of
M GB; D_M(x) is how long (s) the cache stays attached while doing so. P_M(x), not in the
seed, is the compute time (s) the application loses while the cache drains such a burst
beside it (processes that share cores with the gateway; 0 when not measured). They are
measured (calibration), then interpolated: linearly in x among the points of one cache
size, then linearly in M between the two nearest calibrated cache sizes. Nothing is
extrapolated: asking outside the calibrated range raises :class:`CalibrationError`.

The file format (JSON, ``format`` + ``version``) is documented in docs/cost-model.md.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

FORMAT = "squall-calibration"
VERSION = 1
_EPS = 1e-9


class CalibrationError(ValueError):
    """Bad calibration data, or a question outside the calibrated range."""


@dataclass(frozen=True, slots=True)
class CalibrationPoint:
    cache_gb: float  # M
    dataset_gb: float  # x
    throughput_mb_s: float  # B_M(x)
    attach_s: float  # D_M(x)
    compute_slowdown_s: float = 0.0  # P_M(x)


@dataclass(frozen=True, slots=True)
class Configuration:
    """One whole configuration: a backend, its providers, and a calibrated cache."""

    name: str
    backend: str
    providers: int
    backend_bandwidth_mb_s: float  # B_b
    backend_size_gb: float  # N
    cache_bandwidth_mb_s: float  # B_c (0 for a configuration without a cache)
    points: tuple[CalibrationPoint, ...]

    def cache_sizes(self) -> list[float]:
        """The calibrated cache sizes M, ascending."""
        return sorted({p.cache_gb for p in self.points})

    def throughput(self, dataset_gb: float, cache_gb: float) -> float:
        """B_M(x) in MB/s."""
        return self._lookup(dataset_gb, cache_gb, "throughput_mb_s")

    def attach(self, dataset_gb: float, cache_gb: float) -> float:
        """D_M(x) in seconds."""
        return self._lookup(dataset_gb, cache_gb, "attach_s")

    def slowdown(self, dataset_gb: float, cache_gb: float) -> float:
        """P_M(x) in seconds."""
        return self._lookup(dataset_gb, cache_gb, "compute_slowdown_s")

    def _lookup(self, x: float, m: float, field: str) -> float:
        sizes = self.cache_sizes()
        i = bisect.bisect_left(sizes, m - _EPS)
        if i < len(sizes) and abs(sizes[i] - m) <= _EPS:
            return self._along_x(sizes[i], x, field)
        if i == 0 or i == len(sizes):
            raise CalibrationError(
                f"{self.name}: cache size {m:g} GB outside the calibrated range "
                f"[{sizes[0]:g}, {sizes[-1]:g}] GB")
        lo, hi = sizes[i - 1], sizes[i]
        return _lerp(m, lo, self._along_x(lo, x, field), hi, self._along_x(hi, x, field))

    def _along_x(self, m: float, x: float, field: str) -> float:
        row = sorted((p for p in self.points if abs(p.cache_gb - m) <= _EPS),
                     key=lambda p: p.dataset_gb)
        xs = [p.dataset_gb for p in row]
        ys = [float(getattr(p, field)) for p in row]
        i = bisect.bisect_left(xs, x - _EPS)
        if i < len(xs) and abs(xs[i] - x) <= _EPS:
            return ys[i]
        if i == 0 or i == len(xs):
            raise CalibrationError(
                f"{self.name}: dataset size {x:g} GB outside the calibrated range "
                f"[{xs[0]:g}, {xs[-1]:g}] GB for a {m:g} GB cache")
        return _lerp(x, xs[i - 1], ys[i - 1], xs[i], ys[i])


def _lerp(x: float, x0: float, y0: float, x1: float, y1: float) -> float:
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


# -- the file format -------------------------------------------------------------------
class _Point(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cache_gb: float = Field(ge=0, allow_inf_nan=False)
    dataset_gb: float = Field(gt=0, allow_inf_nan=False)
    throughput_mb_s: float = Field(gt=0, allow_inf_nan=False)
    attach_s: float = Field(ge=0, allow_inf_nan=False)
    compute_slowdown_s: float = Field(0.0, ge=0, allow_inf_nan=False)


class _Configuration(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    backend: str = "posix"
    providers: int = Field(default=1, ge=1)
    backend_bandwidth_mb_s: float = Field(ge=0, allow_inf_nan=False)
    backend_size_gb: float = Field(ge=0, allow_inf_nan=False)
    cache_bandwidth_mb_s: float = Field(ge=0, allow_inf_nan=False)
    points: list[_Point] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> _Configuration:
        seen = {(p.cache_gb, p.dataset_gb) for p in self.points}
        if len(seen) != len(self.points):
            raise ValueError("two points with the same cache_gb and dataset_gb")
        return self


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["squall-calibration"]
    version: Literal[1]
    configurations: list[_Configuration] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> _File:
        names = [c.name for c in self.configurations]
        if len(set(names)) != len(names):
            raise ValueError("configuration names must be unique")
        return self


def parse_calibration(data: object) -> list[Configuration]:
    """Validate a decoded calibration document; :class:`CalibrationError` if bad."""
    try:
        doc = _File.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(document)'}: {e['msg']}"
            for e in exc.errors())
        raise CalibrationError(f"invalid calibration: {problems}") from exc
    return [Configuration(name=c.name, backend=c.backend, providers=c.providers,
                          backend_bandwidth_mb_s=c.backend_bandwidth_mb_s,
                          backend_size_gb=c.backend_size_gb,
                          cache_bandwidth_mb_s=c.cache_bandwidth_mb_s,
                          points=tuple(CalibrationPoint(p.cache_gb, p.dataset_gb,
                                                        p.throughput_mb_s, p.attach_s,
                                                        p.compute_slowdown_s)
                                       for p in c.points))
            for c in doc.configurations]


def load_calibration(path: Path) -> list[Configuration]:
    """Read and validate a calibration file; :class:`CalibrationError` if unusable."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise CalibrationError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"{path} is not JSON: {exc}") from exc
    return parse_calibration(data)


def select(configs: Sequence[Configuration], names: Sequence[str]) -> list[Configuration]:
    """The configurations named, in file order (all of them when ``names`` is empty)."""
    if not names:
        return list(configs)
    known = {c.name for c in configs}
    missing = [n for n in names if n not in known]
    if missing:
        raise CalibrationError(f"no configuration named {', '.join(missing)} "
                               f"(known: {', '.join(sorted(known))})")
    return [c for c in configs if c.name in names]
