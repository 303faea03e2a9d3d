"""Multipart rules shared by every backend: completion checks, the multipart ETag and the
part layout recorded with a completed object."""

from __future__ import annotations

import base64
import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import replace

from backends.core.base import CompletedPart, ObjectInfo, ObjectMeta, PartInfo
from backends.core.checksums import new_hasher
from backends.core.errors import EntityTooSmall, InvalidPart, InvalidPartOrder
from backends.core.upload_checksums import object_checksum, undeclared, upload_checksum

MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PART_NUMBER = 10_000
# Reserved user-metadata entry holding a multipart object's part sizes (GET ?partNumber=N),
# as runs ``size*count,size*count``; the S3 layer never shows it and clients cannot set it.
PART_LAYOUT = "squall-parts"
# Reserved user-metadata entry naming the multipart upload an object was completed from,
# so a retried CompleteMultipartUpload of that upload is answered with the same result.
# An upload whose parts go to a backend upload of its own (the cache tier's) declares its
# id in the upload's metadata, which the entry keeps.
COMPLETED_UPLOAD = "squall-upload"
# Reserved user-metadata entry holding the parts' checksums of a multipart object with an
# additional checksum (base64 values, comma-separated, in part order), for GET/HEAD
# ?partNumber=N and GetObjectAttributes; not kept beyond MAX_PART_CHECKSUM_CHARS (like the
# layout, the entry travels as user metadata, which an upstream S3 service limits).
PART_CHECKSUMS = "squall-part-checksums"
MAX_PART_CHECKSUM_CHARS = 512
# Longer layouts (many parts of different sizes) are not recorded: the entry travels as
# user metadata, which an upstream S3 service limits to 2 KiB in all.
MAX_LAYOUT_CHARS = 1024


def last_of_repeats(requested: Sequence[CompletedPart]) -> list[CompletedPart]:
    """``requested`` with a part number listed several times in a row kept once, as its
    last entry: a client that uploaded a part again (a retry, or two uploads of it racing)
    may list each answer, and the part is the upload that finished last, whose ETag it
    learned last. Repeats that are not next to each other stay (InvalidPartOrder)."""
    kept: list[CompletedPart] = []
    for part in requested:
        if kept and kept[-1].part_number == part.part_number:
            kept[-1] = part
        else:
            kept.append(part)
    return kept


def check_completion(requested: Sequence[CompletedPart], stored: Sequence[PartInfo], *,
                     min_part_size: int = MIN_PART_SIZE) -> list[PartInfo]:
    """The stored parts a CompleteMultipartUpload names, in order, as S3 validates them.

    Raises InvalidPart (empty list, unknown part, ETag mismatch), InvalidPartOrder (not
    strictly ascending) and EntityTooSmall (any part but the last below ``min_part_size``).
    """
    if not requested:
        raise InvalidPart("You must specify at least one part.")
    by_number = {p.part_number: p for p in stored}
    chosen: list[PartInfo] = []
    previous = 0
    for req in requested:
        if req.part_number <= previous:
            raise InvalidPartOrder()
        previous = req.part_number
        part = by_number.get(req.part_number)
        if part is None or part.etag != req.etag.strip('"'):
            raise InvalidPart(f"Part {req.part_number} could not be found or its ETag "
                              "did not match.")
        chosen.append(part)
    for part in chosen[:-1]:
        if part.size < min_part_size:
            raise EntityTooSmall(f"Part {part.part_number} is {part.size} bytes; every part "
                                 f"but the last must be at least {min_part_size} bytes.")
    return chosen


def multipart_etag(parts: Sequence[PartInfo]) -> str:
    """S3's ETag of a multipart object: MD5 of the concatenated part MD5s, ``-N``."""
    digest = hashlib.md5(b"".join(bytes.fromhex(p.etag) for p in parts))
    return f"{digest.hexdigest()}-{len(parts)}"


def composite_checksum(parts: Sequence[PartInfo]) -> tuple[str, str] | None:
    """S3's checksum of a multipart object: the checksum of the parts' raw checksums, ``-N``.

    None unless every part carries a checksum of one and the same algorithm.
    """
    algorithms = {p.checksum[0] for p in parts if p.checksum is not None}
    if len(algorithms) != 1 or any(p.checksum is None for p in parts):
        return None
    algorithm = algorithms.pop()
    hasher = new_hasher(algorithm)
    for part in parts:
        assert part.checksum is not None
        hasher.update(base64.b64decode(part.checksum[1]))
    return algorithm, f"{hasher.b64digest()}-{len(parts)}"


def completed_meta(meta: ObjectMeta, parts: Sequence[PartInfo], upload_id: str) -> ObjectMeta:
    """The metadata of an object completed from ``parts`` of upload ``upload_id``: the
    upload's, with the object's checksum, the part layout and the upload's id
    (:data:`COMPLETED_UPLOAD`).

    The checksum follows the upload's declared algorithm and type
    (:mod:`backends.core.upload_checksums`); without a declaration it is the composite of the
    parts' checksums.
    """
    runs = ",".join(f"{size}*{len(list(group))}"
                    for size, group in itertools.groupby(p.size for p in parts))
    spec = upload_checksum(meta)
    user = {k: v for k, v in undeclared(meta).user.items() if k != PART_LAYOUT}
    if len(runs) <= MAX_LAYOUT_CHARS:
        user[PART_LAYOUT] = runs
    user[COMPLETED_UPLOAD] = meta.user.get(COMPLETED_UPLOAD, upload_id)
    user.pop(PART_CHECKSUMS, None)
    checksum = object_checksum(spec, parts) if spec is not None else composite_checksum(parts)
    values = [p.checksum[1] for p in parts
              if checksum is not None and p.checksum is not None and
              p.checksum[0] == checksum[0]]
    if values and len(values) == len(parts) and \
            len(joined := ",".join(values)) <= MAX_PART_CHECKSUM_CHARS:
        user[PART_CHECKSUMS] = joined
    return replace(meta, checksum=checksum, user=user)


def requested_etag(requested: Sequence[CompletedPart]) -> str | None:
    """The multipart ETag of an object completed from the parts a request names (None if
    an ETag named is not an MD5)."""
    try:
        digests = b"".join(bytes.fromhex(p.etag.strip('"')) for p in requested)
    except ValueError:
        return None
    if len(digests) != 16 * len(requested) or not requested:
        return None
    return f"{hashlib.md5(digests).hexdigest()}-{len(requested)}"


def completed_by(info: ObjectInfo, upload_id: str,
                 requested: Sequence[CompletedPart]) -> bool:
    """Whether ``info`` is the object a completion of ``upload_id`` with ``requested``
    made: it records that upload, and its ETag is the one those parts give."""
    return info.meta.user.get(COMPLETED_UPLOAD) == upload_id and \
        info.etag == requested_etag(requested)


def parts_count(etag: str) -> int | None:
    """N of a multipart ETag ``<hex>-N``; None for a single-part object."""
    _, dash, count = etag.rpartition("-")
    return int(count) if dash and count.isdigit() and int(count) > 0 else None


def part_checksum(info: ObjectInfo, part_number: int) -> tuple[str, str] | None:
    """(algorithm, base64) of part ``part_number`` of a multipart object, when its part
    checksums were recorded at completion."""
    raw = info.meta.user.get(PART_CHECKSUMS)
    count = parts_count(info.etag)
    if raw is None or info.meta.checksum is None or count is None:
        return None
    values = raw.split(",")
    if len(values) != count or not 1 <= part_number <= count:
        return None
    return info.meta.checksum[0], values[part_number - 1]


def part_sizes(info: ObjectInfo) -> list[int] | None:
    """The recorded part sizes of a multipart object, None when unknown (or not matching
    its ETag and size, e.g. after a streamed copy)."""
    raw = info.meta.user.get(PART_LAYOUT)
    count = parts_count(info.etag)
    if raw is None or count is None:
        return None
    sizes: list[int] = []
    try:
        for run in raw.split(","):
            size, _, times = run.partition("*")
            if int(times) > MAX_PART_NUMBER:
                return None
            sizes += [int(size)] * int(times)
    except ValueError:
        return None
    if len(sizes) != count or sum(sizes) != info.size or min(sizes) < 0:
        return None
    return sizes
