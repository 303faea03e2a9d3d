"""Sizes ("1GiB", "512k"), rates ("20MiB/s") and durations ("500ms", "2m") as people write
them, parsed into numbers (and sizes spelt back exactly): the one set of unit functions of
the server, the clients and the load tests.

Every bad input raises ValueError (also for wrong types), which pydantic validators turn
into readable settings errors.
"""

from __future__ import annotations

import re

_UNITS: dict[str, int] = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2, "gi": 1024**3, "gib": 1024**3,
    "ti": 1024**4, "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes in ``text``: a non-negative number with an optional decimal (kB, MB, GB, TB)
    or binary (KiB, MiB, GiB, TiB) unit; the unit is case-insensitive ("1GiB" -> 2**30).

    Raises ValueError naming the input and what is accepted.
    """
    if isinstance(text, bool):
        raise ValueError(f"size must be a number of bytes or a string like '1GiB', not {text!r}")  # noqa: TRY004
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size must not be negative: {text}")
        return text
    if not isinstance(text, str):
        raise ValueError(f"size must be a number of bytes or a string like '1GiB', not {text!r}")  # noqa: TRY004
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"invalid size {text!r}: expected a non-negative number with an "
                         "optional unit such as B, kB, MB, GB, KiB, MiB, GiB, TiB")
    number, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(f"invalid size {text!r}: unknown unit {unit!r}; use one of "
                         "B, kB, MB, GB, TB, KiB, MiB, GiB, TiB")
    value = float(number) * factor
    if value != int(value):
        raise ValueError(f"invalid size {text!r}: not a whole number of bytes")
    return int(value)


def parse_rate(text: str | float) -> float:
    """Bytes per second in ``text`` such as "20MiB/s", "1.5GB/s" or "100k" (the "/s" is
    optional). Raises ValueError for negative, zero or malformed rates."""
    if isinstance(text, bool):
        raise ValueError(f"rate must be bytes per second or a string like '20MiB/s', "  # noqa: TRY004
                         f"not {text!r}")
    if isinstance(text, (int, float)):
        value = float(text)
    elif isinstance(text, str):
        body = text.strip()
        if body.lower().endswith("/s"):
            body = body[:-2]
        match = _SIZE.match(body)
        if match is None or match.group(2).lower() not in _UNITS:
            raise ValueError(f"invalid rate {text!r}: expected a positive number of bytes "
                             "per second such as '20MiB/s', '1.5GB/s' or '100000'")
        value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    else:
        raise ValueError(f"rate must be bytes per second or a string like '20MiB/s', "  # noqa: TRY004
                         f"not {text!r}")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"invalid rate {text!r}: must be a positive, finite number")
    return value


def format_size(n: int) -> str:
    """The shortest exact binary spelling of ``n`` bytes: 4096 -> "4KiB", 1000 -> "1000B"."""
    for suffix, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{suffix}"
    return f"{n}B"


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_SECONDS = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in "500ms", "2s", "1.5m", "1h" or a plain number of seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"not a duration: {text!r} (examples: 500ms, 2s, 1m)")
    return float(match.group(1)) * _SECONDS[match.group(2)]
