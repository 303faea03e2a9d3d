"""The strict number parser: ASCII digits only, bounded length, never an exception."""

from __future__ import annotations

import sys

import pytest

from backends.core.numbers import MAX_DIGITS, integer, natural


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("7", 7), ("0042", 42), ("9" * MAX_DIGITS, int("9" * MAX_DIGITS)),
])
def test_natural_accepts_ascii_digits(text: str, value: int) -> None:
    assert natural(text) == value


@pytest.mark.parametrize("text", [
    "", " 1", "1 ", "+1", "-1", "1_000", "1.0", "1e3", "0x10", "²", "١٢", "１２", "৩",
    "9" * (MAX_DIGITS + 1), "9" * 5000, "1\n", "\u200b1",
])
def test_natural_refuses_everything_else(text: str) -> None:
    assert natural(text) is None


def test_no_unicode_digit_is_a_number() -> None:
    digits = [chr(c) for c in range(128, sys.maxunicode + 1) if chr(c).isdigit()]
    assert digits  # "²", Arabic-Indic, full-width ... all pass str.isdigit()
    assert all(natural(d) is None and natural("1" + d) is None for d in digits)


def test_max_digits_bounds_the_length() -> None:
    assert natural("123", max_digits=3) == 123
    assert natural("1234", max_digits=3) is None


@pytest.mark.parametrize(("text", "value"), [
    ("5", 5), ("+5", 5), ("-5", -5), ("-0", 0), ("", None), ("-", None), ("+-1", None),
    ("--1", None), ("-²", None), ("- 1", None), ("-" + "9" * 5000, None),
])
def test_integer_takes_one_sign(text: str, value: int | None) -> None:
    assert integer(text) == value
