"""The cost model of the adaptive-caching seed, section III-B ("Cost model").

A virtual disk of size N and reserved bandwidth B costs N*B per unit of time it is
attached. A backing device that is always attached, plus a caching device whose size
M(x) varies (0 while it is not attached), accumulate over [0, t]::

    C(t) = B_b * N * t  +  B_c * integral_0^t M(x) dx          (adjusted storage accumulation)

with bandwidths in MB/s, sizes in GB and time in seconds; the unit is the *adjusted GB
second* (AGBs). Over n instances the total is C_a = sum_i C_i (section III-C, IV-C).

Squall uses decimal units throughout (1 GB = 10^9 bytes, 1 MB = 10^6 bytes); the seed
does not say, and decimal is what disk and cloud vendors quote. Every function here is
pure; byte and second quantities are converted with :func:`gb` and :func:`mb_per_s`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import Literal

BYTES_PER_GB = 1_000_000_000
BYTES_PER_MB = 1_000_000
MB_PER_GB = BYTES_PER_GB // BYTES_PER_MB

Integration = Literal["trapezoid", "step"]


def gb(n_bytes: float) -> float:
    """Bytes -> GB (decimal)."""
    return n_bytes / BYTES_PER_GB


def mb_per_s(bytes_per_s: float) -> float:
    """Bytes per second -> MB/s (decimal)."""
    return bytes_per_s / BYTES_PER_MB


def _check(name: str, value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def single_disk_accumulation(*, bandwidth_mb_s: float, size_gb: float,
                             seconds: float) -> float:
    """C(t) = B * N * t for one disk attached the whole time (III-B), in AGBs."""
    for name, value in (("bandwidth", bandwidth_mb_s), ("size", size_gb), ("time", seconds)):
        _check(name, value)
    return bandwidth_mb_s * size_gb * seconds


def integrate_size(samples: Sequence[tuple[float, float]],
                   method: Integration = "trapezoid") -> float:
    """integral M(x) dx in GB*s from samples ``(time_s, size_gb)`` in time order.

    ``trapezoid`` joins samples linearly; ``step`` holds each sample until the next, as
    the seed does for its measurements (IV-C: "probe M_i(x) every five seconds and
    assume it stays constant during this interval"). Fewer than two samples give 0.
    """
    total = 0.0
    for (t0, m0), (t1, m1) in itertools.pairwise(samples):
        _check("size", m0)
        _check("size", m1)
        if t1 < t0:
            raise ValueError(f"samples out of time order: {t1} after {t0}")
        dt = t1 - t0
        total += dt * ((m0 + m1) / 2 if method == "trapezoid" else m0)
    return total


def adjusted_storage_accumulation(*, backend_bandwidth_mb_s: float, backend_size_gb: float,
                                  seconds: float, cache_bandwidth_mb_s: float,
                                  cache_gb_seconds: float) -> float:
    """C(t) = B_b*N*t + B_c*integral M(x)dx (III-B), in AGBs.

    ``cache_gb_seconds`` is the integral of the cache size M(x) over [0, t], e.g. from
    :func:`integrate_size`.
    """
    _check("cache bandwidth", cache_bandwidth_mb_s)
    _check("cache GB-seconds", cache_gb_seconds)
    backend = single_disk_accumulation(bandwidth_mb_s=backend_bandwidth_mb_s,
                                       size_gb=backend_size_gb, seconds=seconds)
    return backend + cache_bandwidth_mb_s * cache_gb_seconds


def accumulation_from_samples(samples: Sequence[tuple[float, float]], *,
                              backend_bandwidth_mb_s: float, backend_size_gb: float,
                              cache_bandwidth_mb_s: float,
                              method: Integration = "trapezoid") -> float:
    """C(t) over the span of ``samples`` ``(time_s, cache_size_gb)``; t = last - first."""
    if not samples:
        return 0.0
    return adjusted_storage_accumulation(
        backend_bandwidth_mb_s=backend_bandwidth_mb_s, backend_size_gb=backend_size_gb,
        seconds=samples[-1][0] - samples[0][0], cache_bandwidth_mb_s=cache_bandwidth_mb_s,
        cache_gb_seconds=integrate_size(samples, method))


def total_accumulation(per_instance: Iterable[float]) -> float:
    """C_a = sum over instances of C_i (III-C; IV-C sums 32 VMs), in AGBs."""
    return math.fsum(per_instance)
