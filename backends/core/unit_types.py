"""Sizes, rates and durations as typed pydantic fields.

``ByteSize`` (an ``int`` of bytes) accepts ``1GiB``, ``64MB``, ``4096``; ``Rate`` (a
``float`` of bytes per second) accepts ``20MiB/s``, ``1.5GB/s``, ``100000``; ``Duration``
(a ``float`` of seconds) accepts ``30s``, ``2m``, ``1h``, ``500ms``, ``0.5``. Each parses
with :mod:`backends.core.units`, refuses a bad value with ``expected a size such as 1GiB,
got 'lots'``, and serializes to a form it accepts back (sizes spelt exactly, e.g.
``"1GiB"``). Field constraints (``Field(gt=0)``) apply to the parsed number.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BeforeValidator, PlainSerializer
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from backends.core.units import format_size, parse_duration, parse_rate, parse_size


@dataclass(frozen=True, slots=True)
class Unit:
    """Marks a field as a size, a rate or a duration: what it accepts, for help texts
    and for checks of other descriptions of the same settings (the Helm values schema)."""

    kind: str  # "size", "rate" or "duration"
    metavar: str  # SIZE, RATE, DURATION
    examples: tuple[str, ...]

    @property
    def expected(self) -> str:
        """``a size such as 1GiB, 64MB or 4096``."""
        *head, last = self.examples
        listed = f"{', '.join(head)} or {last}" if head else last
        return f"a {self.kind} such as {listed}"


_SECONDS = re.compile(r"^\s*(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")

SIZE = Unit("size", "SIZE", ("1GiB", "64MB", "4096"))
RATE = Unit("rate", "RATE", ("20MiB/s", "1.5GB/s", "100000"))
DURATION = Unit("duration", "DURATION", ("30s", "2m", "1h", "0.5"))


def _refuse(unit: Unit, value: Any) -> PydanticCustomError:
    return PydanticCustomError(unit.kind, "expected {expected}, got {got}",
                               {"expected": unit.expected, "got": repr(value)})


def _size(value: Any) -> int:
    if isinstance(value, float) and value.is_integer() and value >= 0:
        value = int(value)  # YAML and JSON writers may give 4096.0
    try:
        return parse_size(value)
    except ValueError:
        raise _refuse(SIZE, value) from None


def _rate(value: Any) -> float:
    try:
        return parse_rate(value)
    except ValueError:
        raise _refuse(RATE, value) from None


def _rate_or_off(value: Any) -> float:
    if not isinstance(value, bool) and (value == 0 or (isinstance(value, str)
                                                        and value.strip() in ("0", "0/s"))):
        return 0.0
    return _rate(value)


def _duration(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value >= 0 and math.isfinite(value):
            return float(value)
        raise _refuse(DURATION, value)
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError:
            pass
        if _SECONDS.match(value) and math.isfinite(float(value)):
            return float(value)  # plain seconds in other spellings: ".5", "1e3"
    raise _refuse(DURATION, value)


ByteSize = Annotated[int, BeforeValidator(_size), PlainSerializer(format_size, return_type=str),
                     SIZE]
"""Bytes: ``1GiB``, ``64MB``, ``4096``; serialized as the shortest exact spelling."""

Rate = Annotated[float, BeforeValidator(_rate), PlainSerializer(float, return_type=float),
                 RATE]
"""Bytes per second, > 0: ``20MiB/s``, ``1.5GB/s``, ``100000``."""

RateOrOff = Annotated[float, BeforeValidator(_rate_or_off),
                      PlainSerializer(float, return_type=float), RATE]
"""A :data:`Rate`, or ``0`` for none (a limit turned off)."""

Duration = Annotated[float, BeforeValidator(_duration),
                     PlainSerializer(float, return_type=float), DURATION]
"""Seconds, >= 0: ``30s``, ``2m``, ``1h``, ``500ms``, ``0.5``."""


def unit_of(field: FieldInfo) -> Unit | None:
    """The :class:`Unit` of a model field (``ByteSize``, ``Rate | None``...), None for
    fields of other types."""
    found = next((m for m in field.metadata if isinstance(m, Unit)), None)
    return found if found is not None else _annotation_unit(field.annotation)


def _annotation_unit(annotation: Any) -> Unit | None:
    if get_origin(annotation) is Annotated:
        return next((m for m in get_args(annotation)[1:] if isinstance(m, Unit)), None)
    if get_origin(annotation) in (Union, UnionType):
        return next((u for a in get_args(annotation) if (u := _annotation_unit(a)) is not None), None)
    return None
