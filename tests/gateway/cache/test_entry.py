"""Record encoding: inline segments (version 2, payloads after the JSON), version 1
records still load, and inline payloads are counted in the memory budget."""

from __future__ import annotations

import gc
import json

import pytest

from gateway.cache.entry import (
    Entry,
    EntryState,
    Part,
    Segment,
    decode_entry,
    decode_part,
    encode_entry,
    encode_part,
)
from gateway.cache.inline import InlineBudget, InlinePayload, inline_limit, inline_room
from tests.gateway.cache.conftest import META, md5, payload


def inline_segment(data: bytes, name: str = "a" * 32,
                   budget: InlineBudget | None = None) -> Segment:
    return Segment("vol", name, len(data), md5(data), inline=InlinePayload(data, budget))


def entry_of(*segments: Segment) -> Entry:
    return Entry(bucket="b", key="k/\u00e9", state=EntryState.DIRTY, seq=7,
                 size=sum(s.size for s in segments), etag="e", meta=META, segments=segments,
                 last_modified=1.5, dirty_since=1.5)


def test_inline_entry_round_trip_keeps_raw_bytes_after_the_json() -> None:
    data = payload(5000) + b"\n\n\0"  # newlines in the payload are fine
    raw = encode_entry(entry_of(inline_segment(data)))
    head, _, tail = raw.partition(b"\n")
    assert json.loads(head)["v"] == 2 and tail == data
    budget = InlineBudget()
    back = decode_entry(raw, budget)
    (seg,) = back.segments
    assert seg.inline is not None and seg.inline.data == data
    assert back == entry_of(inline_segment(data))  # inline bytes are not compared
    assert budget.used == len(data)
    del back, seg
    gc.collect()
    assert budget.used == 0  # the payload gave its bytes back


def test_mixed_segments_and_checksums_round_trip() -> None:
    a, b = payload(10, 1), payload(300, 2)
    file_seg = Segment("vol", "f" * 32, 1 << 20, "m" * 32, ("CRC32", "AAAAAA=="))
    inline_a = Segment("vol", "1" * 32, len(a), md5(a), ("CRC32", "BBBBBB=="),
                       inline=InlinePayload(a))
    inline_b = inline_segment(b, "2" * 32)
    back = decode_entry(encode_entry(entry_of(inline_a, file_seg, inline_b)))
    assert back.segments == (inline_a, file_seg, inline_b)
    assert [s.inline.data if s.inline else None for s in back.segments] == [a, None, b]
    assert back.segments[0].checksum == ("CRC32", "BBBBBB==")


def test_records_without_inline_data_stay_version_1() -> None:
    seg = Segment("vol", "f" * 32, 10, "m" * 32)
    raw = encode_entry(entry_of(seg))
    assert b"\n" not in raw and json.loads(raw)["v"] == 1
    assert decode_entry(raw).segments == (seg,)


def test_a_version_1_record_written_before_inline_segments_loads() -> None:
    raw = json.dumps({
        "v": 1, "bucket": "b", "key": "k", "state": "CLEAN", "seq": 3, "size": 4,
        "etag": "e", "meta": {"content_type": "x/y", "user": {}, "tags": {}},
        "segments": [["vol", "f" * 32, 4, "m" * 32]], "last_modified": 2.0,
        "dirty_since": None, "deleted": False}).encode()
    entry = decode_entry(raw)
    assert entry.segments == (Segment("vol", "f" * 32, 4, "m" * 32),)
    assert entry.segments[0].inline is None and entry.state is EntryState.CLEAN


def test_a_record_shorter_than_its_inline_segments_is_refused() -> None:
    raw = encode_entry(entry_of(inline_segment(payload(100))))
    with pytest.raises(ValueError, match="shorter"):
        decode_entry(raw[:-1])


def test_inline_part_round_trip() -> None:
    data = payload(777)
    part = Part(part_number=3, etag=md5(data), size=len(data), last_modified=1.0,
                segment=inline_segment(data), checksum=("SHA256", "c2hh"))
    back = decode_part(encode_part(part))
    assert back == part and back.segment.inline is not None
    assert back.segment.inline.data == data


def test_empty_inline_payload() -> None:
    back = decode_entry(encode_entry(entry_of(inline_segment(b""))))
    assert back.segments[0].inline is not None and back.segments[0].inline.data == b""


def test_inline_memory_limit() -> None:
    assert inline_limit(1 << 40) == 256 << 20  # capped
    assert inline_limit(80 << 20) == 10 << 20  # 1/8 of the capacity
    budget = InlineBudget()
    held = InlinePayload(b"x" * 100, budget)
    assert inline_room(budget, 28, 1024) and not inline_room(budget, 29, 1024)
    del held
