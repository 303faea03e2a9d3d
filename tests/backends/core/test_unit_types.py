"""ByteSize, Rate and Duration: what they accept, what they refuse and how they say it."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError

from backends.core.unit_types import DURATION, RATE, SIZE, ByteSize, Duration, Rate, unit_of


class Model(BaseModel):
    size: ByteSize = 0
    rate: Rate | None = None
    duration: Duration = Field(default=1.0, gt=0)


@pytest.mark.parametrize(("value", "expected"), [
    ("1GiB", 1 << 30), ("64MB", 64_000_000), ("4096", 4096), (4096, 4096), (4096.0, 4096),
    ("512 KiB", 512 * 1024), ("0", 0),
])
def test_sizes(value: object, expected: int) -> None:
    assert Model(size=value).size == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("20MiB/s", 20 * 2**20), ("1.5GB/s", 1.5e9), ("100000", 1e5), (250.5, 250.5), ("8k", 8000),
])
def test_rates(value: object, expected: float) -> None:
    assert Model(rate=value).rate == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("30s", 30.0), ("2m", 120.0), ("1h", 3600.0), ("500ms", 0.5), ("0.5", 0.5), (0.5, 0.5),
    (2, 2.0), (".5", 0.5), ("1e3", 1000.0),
])
def test_durations(value: object, expected: float) -> None:
    assert Model(duration=value).duration == expected


@pytest.mark.parametrize(("field", "value", "message"), [
    ("size", "lots", "expected a size such as 1GiB, 64MB or 4096, got 'lots'"),
    ("size", "-1", "expected a size such as 1GiB, 64MB or 4096, got '-1'"),
    ("size", "1.5B", "got '1.5B'"),
    ("size", True, "got True"),
    ("rate", "fast", "expected a rate such as 20MiB/s, 1.5GB/s or 100000, got 'fast'"),
    ("rate", "0", "got '0'"),
    ("rate", -3, "got -3"),
    ("duration", "soon", "expected a duration such as 30s, 2m, 1h or 0.5, got 'soon'"),
    ("duration", "-1", "got '-1'"),
    ("duration", "inf", "got 'inf'"),
    ("duration", False, "got False"),
])
def test_bad_values_say_what_is_expected(field: str, value: object, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Model(**{field: value})
    errors = caught.value.errors()
    assert len(errors) == 1 and errors[0]["loc"] == (field,)
    assert message in errors[0]["msg"]


def test_constraints_apply_to_the_parsed_number() -> None:
    with pytest.raises(ValidationError, match="greater than 0"):
        Model(duration="0s")


def test_serialized_forms_read_back() -> None:
    model = Model(size="1GiB", rate="20MiB/s", duration="2m")
    assert model.model_dump() == {"size": "1GiB", "rate": 20 * 2**20, "duration": 120.0}
    assert Model(**model.model_dump(mode="json")) == model
    assert Model(size=1000).model_dump()["size"] == "1000B"


def test_unit_of_a_field() -> None:
    fields = Model.model_fields
    assert unit_of(fields["size"]) is SIZE
    assert unit_of(fields["rate"]) is RATE  # inside "| None"
    assert unit_of(fields["duration"]) is DURATION
