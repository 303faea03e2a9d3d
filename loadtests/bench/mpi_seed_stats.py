"""Figures of repeated runs of the MPI seed benchmark (:mod:`loadtests.bench.mpi_seed`):
each figure as its median and its spread (min-max) over the runs that produced it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median


@dataclass(frozen=True, slots=True)
class Spread:
    """The median of a figure over the runs, its lowest and highest value, and how many
    runs gave it (a prediction that failed in a run gives none)."""

    median: float
    low: float
    high: float
    runs: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        """None when no run gave a (finite) value."""
        finite = [v for v in values if math.isfinite(v)]
        if not finite:
            return None
        return cls(median(finite), min(finite), max(finite), len(finite))

    @property
    def relative(self) -> float:
        """(max - min) / |median|: the spread as a fraction of the median."""
        return (self.high - self.low) / abs(self.median) if self.median else math.inf

    def format(self, spec: str, *, suffix: str = "") -> str:
        """``median suffix`` alone for one run, ``median suffix (min-max)`` for more."""
        text = f"{self.median:{spec}}{suffix}"
        if self.runs > 1:
            sep = " to " if self.low < 0 or "+" in spec else "-"
            text += f" ({self.low:{spec}}{sep}{self.high:{spec}})"
        return text


def cell(values: Sequence[float], spec: str, *, suffix: str = "", missing: str = "-") -> str:
    """One table cell of a figure measured in every run: median and spread."""
    spread = Spread.of(values)
    return missing if spread is None else spread.format(spec, suffix=suffix)
