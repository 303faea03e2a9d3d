"""The listing algorithm over a sorted key stream (pure logic, any backend)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from backends.core.base import ObjectInfo, UploadInfo
from gateway.protocol.listing import list_page, upload_page

KEYS = sorted(["a", "a-b", "a/1", "a/2", "a/sub/3", "a0", "b/x", "b/y", "c", "ü/1"])


def _iterate(keys: list[str], prefix: str):  # type: ignore[no-untyped-def]
    opened: list[str] = []

    def iterate(start_after: str) -> AsyncIterator[ObjectInfo]:
        opened.append(start_after)

        async def gen() -> AsyncIterator[ObjectInfo]:
            for key in keys:
                if key > start_after and key.startswith(prefix):
                    yield ObjectInfo("b", key, 1, "e", 0.0)
        return gen()
    return iterate, opened


async def _all_pages(prefix: str, delimiter: str, max_keys: int) -> list[str]:
    iterate, _ = _iterate(KEYS, prefix)
    out: list[str] = []
    after = ""
    while True:
        page = await list_page(iterate, prefix=prefix, delimiter=delimiter,
                               max_keys=max_keys, after=after)
        out += [o.key for o in page.objects] + page.common_prefixes
        assert len(page.objects) + len(page.common_prefixes) <= max_keys
        if not page.is_truncated:
            return out
        assert page.next_marker
        after = page.next_marker


@pytest.mark.parametrize("max_keys", [1, 2, 3, 1000])
async def test_pagination_is_complete_and_ordered(max_keys: int) -> None:
    assert await _all_pages("", "", max_keys) == KEYS
    grouped = await _all_pages("", "/", max_keys)
    assert sorted(grouped) == sorted(["a", "a-b", "a/", "a0", "b/", "c", "ü/"])


async def test_common_prefix_is_skipped_not_walked() -> None:
    iterate, opened = _iterate(KEYS, "")
    page = await list_page(iterate, prefix="", delimiter="/", max_keys=1000, after="")
    assert page.common_prefixes == ["a/", "b/", "ü/"]
    assert len(opened) == 4  # one listing, then one restart after each prefix


async def test_prefix_and_delimiter() -> None:
    iterate, _ = _iterate(KEYS, "a/")
    page = await list_page(iterate, prefix="a/", delimiter="/", max_keys=1000, after="")
    assert [o.key for o in page.objects] == ["a/1", "a/2"]
    assert page.common_prefixes == ["a/sub/"]


async def test_max_keys_zero() -> None:
    iterate, _ = _iterate(KEYS, "")
    page = await list_page(iterate, prefix="", delimiter="", max_keys=0, after="")
    assert page.objects == [] and not page.is_truncated


async def test_multi_character_delimiter() -> None:
    keys = ["x--1", "x--2", "y"]
    iterate, _ = _iterate(keys, "")
    page = await list_page(iterate, prefix="", delimiter="--", max_keys=10, after="")
    assert page.common_prefixes == ["x--"] and [o.key for o in page.objects] == ["y"]


async def test_upload_page_markers_and_prefixes() -> None:
    uploads = [UploadInfo("b", k, f"id{i}", float(i)) for i, k in
               enumerate(["a/1", "a/2", "b", "b", "c"])]

    async def gen() -> AsyncIterator[UploadInfo]:
        for u in uploads:
            yield u

    page = await upload_page(gen(), prefix="", delimiter="/", max_uploads=2, key_marker="",
                             upload_id_marker="")
    assert page.common_prefixes == ["a/"] and [u.key for u in page.uploads] == ["b"]
    assert page.is_truncated
    page = await upload_page(gen(), prefix="", delimiter="", max_uploads=10, key_marker="b",
                             upload_id_marker="id2")
    assert [u.upload_id for u in page.uploads] == ["id3", "id4"]


async def test_keys_past_the_restart_point_of_a_prefix_are_passed_over() -> None:
    """A restart after ``prefix + U+10FFFF`` still meets keys that continue with U+10FFFF:
    their prefix is reported once, on this page and after a marker, without looping."""
    keys = ["a/1", "a/\U0010ffff", "a/\U0010ffffx", "a/\U0010ffff\U0010ffff", "b"]
    iterate, opened = _iterate(keys, "")
    page = await list_page(iterate, prefix="", delimiter="/", max_keys=1000, after="")
    assert page.common_prefixes == ["a/"] and [o.key for o in page.objects] == ["b"]
    assert len(opened) == 2
    page = await list_page(iterate, prefix="", delimiter="/", max_keys=1, after="a/")
    assert page.common_prefixes == [] and [o.key for o in page.objects] == ["b"]
    assert not page.is_truncated
