"""Attributes of objects: the ``mtime`` user metadata and the cache filled by listings."""

from __future__ import annotations

import pytest

from gateway.fuse_mount.attrs import Attr, AttrCache, metadata_for, parse_mtime
from gateway.fuse_mount.store import RemoteObject


@pytest.mark.parametrize(("value", "ns"), [
    ("1600000000", 1_600_000_000_000_000_000),
    ("1600000000.5", 1_600_000_000_500_000_000),
    ("1600000000.123456789", 1_600_000_000_123_456_789),
    ("1600000000.1234567891", 1_600_000_000_123_456_789),  # finer than ns: cut
    ("", None), (None, None), ("soon", None), ("1.2.3", None), ("1e9", None),
])
def test_parse_mtime(value: str | None, ns: int | None) -> None:
    assert parse_mtime(value) == ns


def test_mtime_round_trips_exactly_in_nanoseconds() -> None:
    ns = 1_700_000_000_000_000_001
    stored = metadata_for(mtime_ns=ns)
    assert stored == {"mtime": "1700000000.000000001"}
    obj = RemoteObject("k", 3, "e", 1_800_000_000.0, stored)
    assert Attr.of_object(obj).mtime_ns == ns
    assert Attr.of_object(RemoteObject("k", 3, "e", 1_800_000_000.25)).mtime_ns == (
        1_800_000_000_250_000_000)  # no metadata: LastModified


def test_listing_fills_do_not_replace_fresher_attributes() -> None:
    cache = AttrCache(ttl=60)
    full = Attr(False, 3, 5, mode=0o600)
    cache.put("/d/a", full)
    cache.fill("/d/a", Attr(False, 3, 9))
    cache.fill("/d/b", Attr(False, 4, 9))
    assert cache.get("/d/a") == (True, full)
    assert cache.get("/d/b") == (True, Attr(False, 4, 9))
    uncached = AttrCache(ttl=0)
    uncached.fill("/d/b", Attr(False, 4, 9))
    assert uncached.get("/d/b") == (False, None)
