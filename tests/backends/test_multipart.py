"""What is recorded with a completed multipart object (backends.multipart): the part
layout, the upload it came from and the parts' checksums."""

from __future__ import annotations

from dataclasses import replace

from backends.core.base import CompletedPart, ObjectInfo, ObjectMeta, PartInfo
from backends.multipart import (
    COMPLETED_UPLOAD,
    MAX_LAYOUT_CHARS,
    PART_CHECKSUMS,
    PART_LAYOUT,
    completed_by,
    completed_meta,
    multipart_etag,
    part_checksum,
    part_sizes,
    parts_count,
)


def _parts(sizes: list[int]) -> list[PartInfo]:
    return [PartInfo(n, f"{n:032x}", size, 0.0) for n, size in enumerate(sizes, start=1)]


def _object(sizes: list[int], meta: ObjectMeta) -> ObjectInfo:
    return ObjectInfo("b", "k", sum(sizes), multipart_etag(_parts(sizes)), 0.0, meta)


def test_layout_round_trip_as_runs() -> None:
    sizes = [8, 8, 8, 5, 5, 3]
    meta = completed_meta(ObjectMeta(user={"run": "1"}), _parts(sizes), "u1")
    assert meta.user == {"run": "1", PART_LAYOUT: "8*3,5*2,3*1", COMPLETED_UPLOAD: "u1"}
    assert part_sizes(_object(sizes, meta)) == sizes


def test_layout_that_does_not_fit_the_object_is_ignored() -> None:
    sizes = [8, 8, 3]
    meta = completed_meta(ObjectMeta(), _parts(sizes), "u1")
    info = _object(sizes, meta)
    assert part_sizes(replace(info, size=20)) is None  # sizes do not add up
    assert part_sizes(replace(info, etag="0" * 32)) is None  # a single-part ETag
    assert part_sizes(replace(info, etag=info.etag[:-1] + "4")) is None  # another count
    for bad in ("x*1", "8*", "8*3,5", "-1*3,22*1", "1*99999"):
        broken = replace(info, meta=replace(meta, user={PART_LAYOUT: bad}))
        assert part_sizes(broken) is None, bad


def test_long_layouts_are_not_recorded() -> None:
    sizes = list(range(1_000_000, 1_000_000 + 300))
    meta = completed_meta(ObjectMeta(user={PART_LAYOUT: "stale"}), _parts(sizes), "u1")
    assert PART_LAYOUT not in meta.user
    assert len(",".join(f"{s}*1" for s in sizes)) > MAX_LAYOUT_CHARS


def test_parts_count() -> None:
    assert parts_count("0" * 32 + "-12") == 12
    assert parts_count("0" * 32) is None
    assert parts_count("abc-0") is None
    assert parts_count("abc-x") is None


def test_completed_by_names_the_upload_and_its_parts() -> None:
    sizes = [8, 3]
    parts = _parts(sizes)
    info = _object(sizes, completed_meta(ObjectMeta(), parts, "u1"))
    requested = [CompletedPart(p.part_number, f'"{p.etag}"') for p in parts]
    assert completed_by(info, "u1", requested)
    assert not completed_by(info, "u2", requested)  # another upload
    assert not completed_by(info, "u1", requested[:1])  # other parts
    assert not completed_by(info, "u1", [CompletedPart(1, "not-hex"), requested[1]])
    # The cache tier's backend upload keeps the id the cache gave the upload.
    kept = completed_meta(ObjectMeta(user={COMPLETED_UPLOAD: "cached"}), parts, "backend")
    assert kept.user[COMPLETED_UPLOAD] == "cached"
    plain = replace(info, meta=ObjectMeta())  # an object that records no upload
    assert not completed_by(plain, "u1", requested)


def test_part_checksums_are_kept_when_they_fit() -> None:
    sizes = [8, 3]
    parts = [replace(p, checksum=("CRC32", f"AAAAA{n}==")) for n, p in
             enumerate(_parts(sizes), start=1)]
    meta = completed_meta(ObjectMeta(), parts, "u1")
    assert meta.user[PART_CHECKSUMS] == "AAAAA1==,AAAAA2=="
    info = _object(sizes, meta)
    assert part_checksum(info, 2) == ("CRC32", "AAAAA2==")
    assert part_checksum(info, 3) is None
    mixed = [parts[0], replace(parts[1], checksum=None)]
    assert PART_CHECKSUMS not in completed_meta(ObjectMeta(), mixed, "u1").user
    many = [replace(p, checksum=("SHA256", "A" * 43 + "=")) for p in _parts([8] * 20)]
    assert PART_CHECKSUMS not in completed_meta(ObjectMeta(), many, "u1").user
