"""Byte sizes and weighted mixes as written on command lines ("64MiB", "4KiB:60,1MiB:10")."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1 << 10,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1 << 20,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1 << 30,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """Parse "4KiB", "64MiB", "1.5GiB", "10MB" or a plain byte count into bytes."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (examples: 4KiB, 64MiB, 1GiB, 1000)")
    return int(float(match.group(1)) * _UNITS[unit])


def format_size(n: int) -> str:
    """The shortest exact binary spelling of ``n`` bytes: 4096 -> "4KiB", 1000 -> "1000B"."""
    for suffix, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{suffix}"
    return f"{n}B"


def parse_duration(text: str) -> float:
    """Parse "500ms", "2s", "1.5m", "1h" or plain seconds into seconds."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", text)
    if match is None:
        raise ValueError(f"not a duration: {text!r} (examples: 500ms, 2s, 1m)")
    factor = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0}[match.group(2)]
    return float(match.group(1)) * factor


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
