"""Sizes and durations for people reading the command line."""

from __future__ import annotations


def format_bytes(size: float) -> str:
    """``size`` in the largest binary unit that keeps it >= 1 (``12.0 MiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 10 min``."""
    whole = int(seconds + 0.5)
    if whole < 60:
        return f"{whole} s"
    minutes, whole = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {whole:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
