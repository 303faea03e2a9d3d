from __future__ import annotations

import random

import pytest

from backends.core.units import format_size, parse_duration, parse_size
from loadtests.units import parse_mix, percentile


@pytest.mark.parametrize(
    ("text", "size"),
    [("4KiB", 4096), ("64MiB", 64 << 20), ("1GiB", 1 << 30), ("10MB", 10_000_000),
     ("1000", 1000), ("0", 0), ("1.5KiB", 1536), (" 2 mib ", 2 << 20)],
)  # fmt: skip
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "KiB", "4 parsecs", "-1", "1e3"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid size"):
        parse_size(text)


@pytest.mark.parametrize(
    ("size", "text"), [(4096, "4KiB"), (64 << 20, "64MiB"), (1 << 30, "1GiB"), (1000, "1000B"),
                       (1536, "1536B"), (0, "0B")],
)  # fmt: skip
def test_format_size_is_exact(size: int, text: str) -> None:
    assert format_size(size) == text
    assert parse_size(text) == size


def test_parse_duration() -> None:
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2s") == 2.0
    assert parse_duration("1.5m") == 90.0
    assert parse_duration("3") == 3.0
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")


def test_parse_mix_and_pick() -> None:
    mix = parse_mix("4KiB:60, 1MiB:40,8MiB:0")
    assert mix.sizes == (4096, 1 << 20, 8 << 20)
    assert mix.weights == (60.0, 40.0, 0.0)
    picks = {mix.pick(random.Random(seed)) for seed in range(200)}
    assert picks == {4096, 1 << 20}  # a zero weight is never drawn
    assert mix.mean == pytest.approx(0.6 * 4096 + 0.4 * (1 << 20))
    assert parse_mix("1KiB").weights == (1.0,)


@pytest.mark.parametrize("text", ["", "4KiB:-1", "4KiB:0", "big:1"])
def test_parse_mix_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_mix(text)


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile(values, 0) == 1
    assert percentile([], 50) == 0
