"""Sizes and rates as written in settings: see :mod:`backends.units` (shared with backends)."""

from backends.units import parse_rate, parse_size

__all__ = ["parse_rate", "parse_size"]
