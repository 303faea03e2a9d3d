"""The part layout recorded with a completed multipart object (backends.multipart)."""

from __future__ import annotations

from dataclasses import replace

from backends.core.base import ObjectInfo, ObjectMeta, PartInfo
from backends.multipart import (
    MAX_LAYOUT_CHARS,
    PART_LAYOUT,
    completed_meta,
    multipart_etag,
    part_sizes,
    parts_count,
)


def _parts(sizes: list[int]) -> list[PartInfo]:
    return [PartInfo(n, f"{n:032x}", size, 0.0) for n, size in enumerate(sizes, start=1)]


def _object(sizes: list[int], meta: ObjectMeta) -> ObjectInfo:
    return ObjectInfo("b", "k", sum(sizes), multipart_etag(_parts(sizes)), 0.0, meta)


def test_layout_round_trip_as_runs() -> None:
    sizes = [8, 8, 8, 5, 5, 3]
    meta = completed_meta(ObjectMeta(user={"run": "1"}), _parts(sizes))
    assert meta.user == {"run": "1", PART_LAYOUT: "8*3,5*2,3*1"}
    assert part_sizes(_object(sizes, meta)) == sizes


def test_layout_that_does_not_fit_the_object_is_ignored() -> None:
    sizes = [8, 8, 3]
    meta = completed_meta(ObjectMeta(), _parts(sizes))
    info = _object(sizes, meta)
    assert part_sizes(replace(info, size=20)) is None  # sizes do not add up
    assert part_sizes(replace(info, etag="0" * 32)) is None  # a single-part ETag
    assert part_sizes(replace(info, etag=info.etag[:-1] + "4")) is None  # another count
    for bad in ("x*1", "8*", "8*3,5", "-1*3,22*1", "1*99999"):
        broken = replace(info, meta=replace(meta, user={PART_LAYOUT: bad}))
        assert part_sizes(broken) is None, bad


def test_long_layouts_are_not_recorded() -> None:
    sizes = list(range(1_000_000, 1_000_000 + 300))
    meta = completed_meta(ObjectMeta(user={PART_LAYOUT: "stale"}), _parts(sizes))
    assert PART_LAYOUT not in meta.user
    assert len(",".join(f"{s}*1" for s in sizes)) > MAX_LAYOUT_CHARS


def test_parts_count() -> None:
    assert parts_count("0" * 32 + "-12") == 12
    assert parts_count("0" * 32) is None
    assert parts_count("abc-0") is None
    assert parts_count("abc-x") is None
