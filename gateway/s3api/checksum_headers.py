"""Checksum headers and XML elements of multipart uploads and GetObjectAttributes.

CreateMultipartUpload: ``x-amz-checksum-algorithm`` and ``x-amz-checksum-type`` (checked
with S3's messages). CompleteMultipartUpload: ``x-amz-checksum-type``, the full-object
``x-amz-checksum-<alg>`` the client expects, and each ``<Part>``'s ``<Checksum<ALG>>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from xml.etree.ElementTree import Element

from backends.core.base import CHECKSUM_ALGORITHMS, ObjectInfo
from backends.core.checksums import algorithm_from_header_name, decode_value
from backends.core.upload_checksums import (
    CHECKSUM_TYPES,
    UploadChecksum,
    allowed,
    checksum_type,
    default_type,
)
from backends.multipart import MAX_PART_NUMBER
from gateway.protocol.errors import InvalidRequest
from gateway.protocol.xml import el

_UNSUPPORTED = ("Checksum algorithm provided is unsupported. Please try again with any of the "
                "valid types: [" + ", ".join(CHECKSUM_ALGORITHMS) + "]")
_MULTIPLE = ("Expecting a single x-amz-checksum- header. Multiple checksum Types are not "
             "allowed.")


def requested_type(headers: Mapping[str, str]) -> str | None:
    """``x-amz-checksum-type`` (case-insensitive); InvalidRequest for another value."""
    raw = headers.get("x-amz-checksum-type")
    if raw is None:
        return None
    value = raw.strip().upper()
    if value not in CHECKSUM_TYPES:
        raise InvalidRequest("Value for x-amz-checksum-type header is invalid.")
    return value


def upload_checksum(headers: Mapping[str, str]) -> UploadChecksum | None:
    """The algorithm and type a CreateMultipartUpload asks for, as S3 validates them."""
    raw = headers.get("x-amz-checksum-algorithm")
    kind = requested_type(headers)
    if raw is None:
        if kind is not None:
            raise InvalidRequest("The x-amz-checksum-type header can only be used with the "
                                 "x-amz-checksum-algorithm header.")
        return None
    algorithm = raw.strip().upper()
    if algorithm not in CHECKSUM_ALGORITHMS:
        raise InvalidRequest(_UNSUPPORTED)
    kind = kind or default_type(algorithm)
    if not allowed(algorithm, kind):
        raise InvalidRequest(f"The {kind} checksum type cannot be used with the "
                             f"{algorithm.lower()} checksum algorithm.")
    return UploadChecksum(algorithm, kind)


def upload_headers(spec: UploadChecksum | None) -> dict[str, str]:
    """What CreateMultipartUpload answers about the upload's checksum."""
    if spec is None:
        return {}
    return {"x-amz-checksum-algorithm": spec.algorithm, "x-amz-checksum-type": spec.type}


def object_checksum(headers: Mapping[str, str]) -> tuple[str, str] | None:
    """The object's ``x-amz-checksum-<alg>`` header of a CompleteMultipartUpload: a
    checksum value, or for a composite one the value the client computed over the parts'
    checksums, with or without S3's ``-N`` suffix. A value of another form is
    InvalidRequest (one of the right form that does not match is BadDigest, later)."""
    found = [(algorithm, name, value) for name, value in headers.items()
             if (algorithm := algorithm_from_header_name(name)) is not None]
    if not found:
        return None
    if len(found) > 1:
        raise InvalidRequest(_MULTIPLE)
    algorithm, name, value = found[0]
    value = value.strip()
    digest, dash, count = value.rpartition("-")
    if not dash:
        digest = value
    elif not (count.isascii() and count.isdigit() and 1 <= int(count) <= MAX_PART_NUMBER
              and len(count) <= 5):
        raise InvalidRequest(f"Value for {name} header is invalid.")
    if decode_value(algorithm, digest) is None:
        raise InvalidRequest(f"Value for {name} header is invalid.")
    return algorithm, value


def without_checksum_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` minus ``x-amz-checksum-<alg>`` values (on CompleteMultipartUpload they
    describe the object, not the request document)."""
    return {k: v for k, v in headers.items() if algorithm_from_header_name(k) is None}


def part_checksums(node: Element) -> tuple[tuple[str, str], ...]:
    """The ``<Checksum<ALG>>`` elements of a CompleteMultipartUpload ``<Part>``."""
    found = []
    for child in node:
        tag = child.tag if isinstance(child.tag, str) else ""
        if tag.startswith("Checksum") and tag[8:] in CHECKSUM_ALGORITHMS:
            found.append((tag[8:], (child.text or "").strip()))
    return tuple(found)


def checksum_elements(checksum: tuple[str, str] | None, *, with_type: bool = True) -> str:
    """``<Checksum<ALG>>`` (and ``<ChecksumType>``) for a stored checksum (a composite
    value with its ``-N`` suffix)."""
    if checksum is None:
        return ""
    algorithm, value = checksum
    out = el(f"Checksum{algorithm}", value)
    return out + el("ChecksumType", checksum_type(value)) if with_type else out


def object_checksum_headers(info: ObjectInfo) -> dict[str, str]:
    """``x-amz-checksum-<alg>`` and ``x-amz-checksum-type`` of a stored object."""
    if info.meta.checksum is None:
        return {}
    algorithm, value = info.meta.checksum
    return {f"x-amz-checksum-{algorithm.lower()}": value,
            "x-amz-checksum-type": checksum_type(value)}
