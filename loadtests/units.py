"""Weighted size mixes as written on command lines ("4KiB:60,1MiB:10") and percentiles.

Sizes and durations themselves are parsed by :mod:`backends.core.units`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from backends.core.units import parse_size


@dataclass(frozen=True, slots=True)
class SizeMix:
    """Object sizes with relative weights; ``pick`` draws one size."""

    sizes: tuple[int, ...]
    weights: tuple[float, ...]

    def pick(self, rng: random.Random | None = None) -> int:
        return (rng or random).choices(self.sizes, weights=self.weights)[0]

    @property
    def mean(self) -> float:
        total = sum(self.weights)
        return sum(s * w for s, w in zip(self.sizes, self.weights, strict=True)) / total


def parse_mix(text: str) -> SizeMix:
    """Parse "4KiB:60,64KiB:25,1MiB:10,8MiB:5" (weight defaults to 1) into a :class:`SizeMix`."""
    sizes: list[int] = []
    weights: list[float] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        size, _, weight = item.partition(":")
        sizes.append(parse_size(size))
        weights.append(float(weight) if weight else 1.0)
    if not sizes or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"not a size mix: {text!r} (example: 4KiB:60,1MiB:10)")
    return SizeMix(tuple(sizes), tuple(weights))


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of ``values`` (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(pct / 100 * len(ordered))))
    return ordered[rank - 1]
