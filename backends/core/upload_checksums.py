"""The additional checksum a multipart upload declares, as S3 handles it.

CreateMultipartUpload may name an algorithm and a checksum type; the upload keeps them in
the reserved user-metadata entry :data:`UPLOAD_CHECKSUM` (``ALGORITHM:TYPE``), so every
backend stores them with the upload as it stores the rest of its metadata. The entry is
never shown to clients and is dropped from the completed object.

* Every part must then carry a checksum of that algorithm (:func:`part_checksum`).
* The object's checksum is COMPOSITE (the algorithm over the parts' raw checksums, ``-N``)
  or FULL_OBJECT (the CRC of the whole object, combined from the parts' CRCs and sizes):
  :func:`object_checksum`. A value with a ``-N`` suffix is composite
  (:func:`checksum_type`).
* CompleteMultipartUpload names each part's checksum; :func:`check_requested` applies S3's
  rules before anything is committed.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, replace

from awscrt import checksums as _crt

from backends.core.base import (
    CHECKSUM_ALGORITHMS,
    CompletedPart,
    DescribedBody,
    ObjectMeta,
    PartInfo,
)
from backends.core.checksums import new_hasher
from backends.core.errors import BadDigest, InvalidPart, InvalidPartOrder, InvalidRequestForObject

UPLOAD_CHECKSUM = "squall-upload-checksum"
COMPOSITE = "COMPOSITE"
FULL_OBJECT = "FULL_OBJECT"
CHECKSUM_TYPES = (COMPOSITE, FULL_OBJECT)
# CRCs combine over concatenated data: fn(crc_a, crc_b, len_b) -> crc of a + b.
_COMBINE = {"CRC32": _crt.combine_crc32, "CRC32C": _crt.combine_crc32c,
            "CRC64NVME": _crt.combine_crc64nvme}
_INVALID_PART = ("One or more of the specified parts could not be found.  The part may not "
                 "have been uploaded, or the specified entity tag may not match the part's "
                 "entity tag.")


@dataclass(frozen=True, slots=True)
class UploadChecksum:
    """An upload's checksum algorithm (of CHECKSUM_ALGORITHMS) and type (of CHECKSUM_TYPES)."""

    algorithm: str
    type: str

    def encode(self) -> str:
        return f"{self.algorithm}:{self.type}"


def default_type(algorithm: str) -> str:
    """S3's type for an algorithm given alone: FULL_OBJECT for CRC64NVME, else COMPOSITE."""
    return FULL_OBJECT if algorithm == "CRC64NVME" else COMPOSITE


def allowed(algorithm: str, checksum_type: str) -> bool:
    """S3's combinations: FULL_OBJECT needs a CRC, CRC64NVME is FULL_OBJECT only."""
    if checksum_type == FULL_OBJECT:
        return algorithm in _COMBINE
    return algorithm != "CRC64NVME"


def checksum_type(value: str) -> str:
    """The type of a stored checksum value: composite ones end with ``-N``."""
    return COMPOSITE if "-" in value else FULL_OBJECT


def upload_checksum(meta: ObjectMeta) -> UploadChecksum | None:
    """The checksum an upload with metadata ``meta`` declared, None if none."""
    raw = meta.user.get(UPLOAD_CHECKSUM)
    if raw is None:
        return None
    algorithm, _, kind = raw.partition(":")
    if algorithm not in CHECKSUM_ALGORITHMS or kind not in CHECKSUM_TYPES:
        return None
    return UploadChecksum(algorithm, kind)


def declare(meta: ObjectMeta, spec: UploadChecksum | None) -> ObjectMeta:
    """``meta`` of a new upload recording ``spec`` (and no entry of a client's)."""
    user = {k: v for k, v in meta.user.items() if k != UPLOAD_CHECKSUM}
    if spec is not None:
        user[UPLOAD_CHECKSUM] = spec.encode()
    return replace(meta, user=user)


def undeclared(meta: ObjectMeta) -> ObjectMeta:
    """``meta`` without the upload's declaration (the completed object's metadata)."""
    if UPLOAD_CHECKSUM not in meta.user:
        return meta
    return replace(meta, user={k: v for k, v in meta.user.items() if k != UPLOAD_CHECKSUM})


def _mismatch(expected: str, actual: str | None) -> InvalidRequestForObject:
    return InvalidRequestForObject(
        f"Checksum Type mismatch occurred, expected checksum Type: {expected.lower()}, "
        f"actual checksum Type: {(actual or 'null').lower()}")


def part_checksum(upload_meta: ObjectMeta, body: DescribedBody) -> tuple[str, str] | None:
    """The checksum a part's body verified, once read (see :func:`backends.core.base.final_meta`),
    checked against the upload's algorithm: a part without it, or with another algorithm,
    is S3's InvalidRequest "Checksum Type mismatch occurred"."""
    checksum = body.facts.checksum
    spec = upload_checksum(upload_meta)
    if spec is not None and (checksum is None or checksum[0] != spec.algorithm):
        raise _mismatch(spec.algorithm, checksum[0] if checksum else None)
    return checksum


def composite_checksum(algorithm: str, parts: Sequence[PartInfo]) -> tuple[str, str] | None:
    """The algorithm over the parts' raw checksums, ``-N``; None unless every part has one
    of ``algorithm``."""
    if not parts or any(p.checksum is None or p.checksum[0] != algorithm for p in parts):
        return None
    hasher = new_hasher(algorithm)
    for part in parts:
        assert part.checksum is not None
        hasher.update(base64.b64decode(part.checksum[1]))
    return algorithm, f"{hasher.b64digest()}-{len(parts)}"


def full_object_checksum(algorithm: str, parts: Sequence[PartInfo]) -> tuple[str, str] | None:
    """The CRC of the whole object from the parts' CRCs and sizes; None unless every part
    has a checksum of ``algorithm`` (a CRC)."""
    combine = _COMBINE.get(algorithm)
    if combine is None or not parts or any(p.checksum is None or p.checksum[0] != algorithm
                                           for p in parts):
        return None
    total = 0
    for part in parts:
        assert part.checksum is not None
        crc = int.from_bytes(base64.b64decode(part.checksum[1]), "big")
        total = combine(total, crc, part.size)
    size = 8 if algorithm == "CRC64NVME" else 4
    return algorithm, base64.b64encode(total.to_bytes(size, "big")).decode("ascii")


def object_checksum(spec: UploadChecksum, parts: Sequence[PartInfo]) -> tuple[str, str] | None:
    """The checksum of the object completed from ``parts`` under ``spec``."""
    if spec.type == FULL_OBJECT:
        return full_object_checksum(spec.algorithm, parts)
    return composite_checksum(spec.algorithm, parts)


def check_requested(spec: UploadChecksum | None, requested: Sequence[CompletedPart],
                    chosen: Sequence[PartInfo]) -> None:
    """S3's checks of the part checksums a CompleteMultipartUpload names (``requested``,
    matched in order with the stored parts ``chosen``).

    With a declared algorithm: a part naming another algorithm only is BadDigest; a value
    that differs from the stored part's is InvalidPart; a missing value is InvalidRequest
    for COMPOSITE uploads (a FULL_OBJECT upload does not need it); part numbers must be
    1..N (InvalidPartOrder). Without one, checksums named are not checked.
    """
    if spec is None:
        return
    if [p.part_number for p in requested] != list(range(1, len(requested) + 1)):
        raise InvalidPartOrder("With part checksums, part numbers must start at 1 and be "
                               "consecutive.")
    for req, part in zip(requested, chosen, strict=True):
        named = dict(req.checksums)
        value = named.get(spec.algorithm)
        if value is None:
            if named:
                other = next(iter(named)).lower()
                raise BadDigest(f"The {other} you specified for part {req.part_number} did "
                                "not match what we received.")
            if spec.type == COMPOSITE:
                raise InvalidRequestForObject(
                    f"The upload was created using a {spec.algorithm.lower()} checksum. The "
                    "complete request must include the checksum for each part. It was "
                    f"missing for part {req.part_number} in the request.")
            continue
        if part.checksum is None or part.checksum != (spec.algorithm, value.strip()):
            raise InvalidPart(_INVALID_PART)


def check_object_checksum(spec: UploadChecksum | None, computed: tuple[str, str] | None,
                          expected: tuple[str, str] | None,
                          requested_type: str | None) -> None:
    """The object-level checks of a CompleteMultipartUpload: ``x-amz-checksum-type`` must be
    the upload's type (InvalidRequest); an object checksum header must be of the upload's
    algorithm and equal the computed checksum (BadDigest): for a FULL_OBJECT upload the
    checksum of the whole object, for a COMPOSITE one the checksum of the parts'
    checksums, with or without its ``-N`` (a client computes it as S3 does)."""
    if spec is None:
        return
    if requested_type is not None and requested_type != spec.type:
        raise InvalidRequestForObject(
            f"The upload was created using the {spec.type} checksum mode. The complete "
            "request must use the same checksum mode.")
    if expected is None:
        return
    value = expected[1].strip()
    if computed is not None and spec.type == COMPOSITE and "-" not in value:
        value = f"{value}-{computed[1].rpartition('-')[2]}"
    if expected[0] != spec.algorithm or (computed is not None and value != computed[1]):
        raise BadDigest(f"The {spec.algorithm.lower()} you specified did not match the "
                        "calculated checksum.")
