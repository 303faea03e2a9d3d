"""Property tests of the strict number parser and of the Range headers built on it."""

from __future__ import annotations

import string

from hypothesis import example, given
from hypothesis import strategies as st

from backends.core.base import RangeRequest
from backends.core.errors import InvalidRange
from backends.core.numbers import INT32_MAX, MAX_DIGITS, integer, natural
from gateway.protocol.errors import InvalidArgument
from gateway.s3api import headers as h
from gateway.s3api.context import S3Request
from gateway.s3api.endpoint import ANONYMOUS
from tests.gateway.s3api.fuzz.common import UNIT, only_s3_errors

#: digits that str.isdigit / int() accept and the wire must not: superscripts, Arabic-Indic,
#: full-width, Devanagari, mathematical bold...
NON_ASCII_DIGITS = st.characters(categories=["Nd", "No"]).filter(lambda c: not c.isascii())
#: text that looks like numbers: ASCII digits, the lookalikes, signs, spaces, separators
NUMBERISH = st.text(st.one_of(st.sampled_from(string.digits + "+-_ ., \t"), NON_ASCII_DIGITS),
                    max_size=30)
ANY_TEXT = st.one_of(NUMBERISH, st.text(max_size=40),
                     st.integers(min_value=0).map(lambda n: "9" * (n % 6000)))


@UNIT
@given(st.integers(min_value=0, max_value=10**MAX_DIGITS - 1))
def test_natural_reads_back_what_str_writes(n: int) -> None:
    assert natural(str(n)) == n
    assert integer(str(n)) == n and integer(f"+{n}") == n and integer(f"-{n}") == -n


@UNIT
@given(ANY_TEXT)
@example("²")
@example("١٢٣")
@example("0" * 5000)
@example("1_000")
def test_natural_takes_ascii_digits_only(text: str) -> None:
    value = natural(text)
    valid = 0 < len(text) <= MAX_DIGITS and all(c in string.digits for c in text)
    assert (value is not None) == valid
    if value is not None:
        assert value == int(text) and value >= 0
    signed = integer(text)
    if signed is not None:
        assert str(abs(signed)) == text.lstrip("+-").lstrip("0") or signed == 0


@UNIT
@given(st.text(string.digits, min_size=1, max_size=MAX_DIGITS), st.data())
def test_one_lookalike_digit_makes_a_number_invalid(digits: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(digits) - 1))
    bad = digits[:at] + data.draw(NON_ASCII_DIGITS) + digits[at + 1:]
    assert natural(bad) is None and integer(bad) is None


@UNIT
@given(st.integers(min_value=0, max_value=2**63), st.integers(min_value=0, max_value=2**63))
def test_byte_range_round_trips(first: int, last: int) -> None:
    parsed = h.byte_range(f"bytes={first}-{last}")
    assert parsed == (RangeRequest(first=first, last=last) if first <= last else None)
    assert h.byte_range(f"bytes={first}-") == RangeRequest(first=first)
    assert h.byte_range(f"bytes=-{last}") == RangeRequest(suffix=last)


RANGE_TEXT = st.one_of(
    ANY_TEXT,
    st.builds(lambda a, b, p: f"{p}{a}-{b}", NUMBERISH, NUMBERISH,
              st.sampled_from(["bytes=", "bytes =", "Bytes=", "bytes=bytes=", "items=", ""])),
    st.builds(lambda a, b: f"bytes={a}-{b},{b}-{a}", NUMBERISH, NUMBERISH))


@UNIT
@given(RANGE_TEXT, st.integers(min_value=0, max_value=2**40))
@example("bytes=0-" + "9" * 5000, 10)
@example("bytes=²-5", 10)
def test_range_header_is_a_valid_range_or_ignored(value: str, size: int) -> None:
    parsed = h.byte_range(value)
    if parsed is None:
        return
    if parsed.suffix is not None:
        assert parsed.first is None and parsed.last is None and parsed.suffix >= 0
    else:
        assert parsed.first is not None and parsed.first >= 0
        assert parsed.last is None or parsed.last >= parsed.first
    try:
        resolved = parsed.resolve(size)
    except InvalidRange:
        return
    assert 0 <= resolved.start <= resolved.end < size


@UNIT
@given(st.one_of(st.text(max_size=60), st.builds(lambda b, k: f"/{b}/{k}", st.text(max_size=10),
                                                  st.text(max_size=20))),
       st.one_of(st.none(), RANGE_TEXT))
@example("/b/k", "bytes=0-" + "9" * 5000)
@example("/b/k?versionId=", None)
@example("/b/%ZZ%C3", None)
def test_copy_source_and_its_range(source: str, range_value: str | None) -> None:
    headers = {"x-amz-copy-source": source}
    if range_value is not None:
        headers["x-amz-copy-source-range"] = range_value
    with only_s3_errors():
        copy = h.copy_source(headers)
        assert copy.bucket and copy.key
        if range_value is not None:
            assert copy.byte_range is not None and copy.byte_range.last is not None


def _request(query: dict[str, str]) -> S3Request:
    # int_query reads only the query: no HTTP request or service behind this one
    return S3Request(request=None, operation="", bucket="", key="",  # type: ignore[arg-type]
                     query=query, headers={}, auth=ANONYMOUS, request_id="",
                     service=None)  # type: ignore[arg-type]


@UNIT
@given(st.one_of(st.none(), ANY_TEXT), st.integers(0, 5), st.one_of(st.none(),
                                                                      st.integers(5, 1000)))
@example("²", 0, None)
@example("9" * 5000, 0, None)
@example("-1", 0, None)
def test_integer_query_parameters(raw: str | None, low: int, high: int | None) -> None:
    query = {} if raw is None else {"max-keys": raw}
    number = integer(raw) if raw else None
    valid = not raw or (number is not None and low <= number <= INT32_MAX)
    try:
        value = _request(query).int_query("max-keys", 7, low=low, high=high)
    except InvalidArgument:
        assert not valid
        return
    assert valid
    assert value == 7 if not raw else low <= value <= (high or INT32_MAX)
