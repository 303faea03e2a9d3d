"""S3 additional checksums (CRC32, CRC32C, CRC64NVME, SHA1, SHA256, SHA512, MD5, XXHASH64,
XXHASH3, XXHASH128): hashers and value codecs.

CRC32 uses :func:`zlib.crc32`; CRC32C, CRC64NVME and the xxHash family (XXH64, XXH3-64,
XXH3-128, seed 0) use ``awscrt.checksums`` (hardware accelerated, the same library the AWS
SDKs use), SHA-1/SHA-256/SHA-512/MD5 use :mod:`hashlib`.
Values travel on the wire as base64 of the big-endian digest.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from collections.abc import Callable
from typing import Protocol

from awscrt import checksums as _crt

from backends.core.base import CHECKSUM_ALGORITHMS

_HEADER_PREFIX = "x-amz-checksum-"

# Raw digest size in bytes per algorithm: what a valid base64 value must decode to.
DIGEST_SIZES: dict[str, int] = {
    "CRC32": 4,
    "CRC32C": 4,
    "CRC64NVME": 8,
    "SHA1": 20,
    "SHA256": 32,
    "SHA512": 64,
    "MD5": 16,
    "XXHASH64": 8,
    "XXHASH3": 8,
    "XXHASH128": 16,
}
_HASHLIB = {"SHA1": "sha1", "SHA256": "sha256", "SHA512": "sha512", "MD5": "md5"}
_XXHASH = {"XXHASH64": _crt.XXHash.new_xxhash64, "XXHASH3": _crt.XXHash.new_xxhash3_64,
           "XXHASH128": _crt.XXHash.new_xxhash3_128}


class Hasher(Protocol):
    """An incremental checksum over a byte stream; ``cheap``: a few GB/s, not worth a
    worker thread (a thread hop costs more than a CRC of a network read)."""

    cheap: bool

    def update(self, data: bytes) -> None: ...

    def digest(self) -> bytes: ...

    def b64digest(self) -> str: ...


class _Crc:
    """A CRC kept as an int; ``fn(data, previous) -> int`` continues it."""

    __slots__ = ("_fn", "_size", "_value")
    cheap = True

    def __init__(self, fn: Callable[[bytes, int], int], size: int) -> None:
        self._fn = fn
        self._value = 0
        self._size = size

    def update(self, data: bytes) -> None:
        self._value = self._fn(data, self._value)

    def digest(self) -> bytes:
        return self._value.to_bytes(self._size, "big")

    def b64digest(self) -> str:
        return base64.b64encode(self.digest()).decode("ascii")


class _Hash:
    """A hashlib hash behind the :class:`Hasher` protocol."""

    __slots__ = ("_h",)
    cheap = False

    def __init__(self, name: str) -> None:
        self._h = hashlib.new(name)

    def update(self, data: bytes) -> None:
        self._h.update(data)

    def digest(self) -> bytes:
        return self._h.digest()

    def b64digest(self) -> str:
        return base64.b64encode(self._h.digest()).decode("ascii")


class _XXHash:
    """An xxHash of ``awscrt`` (finalized once, when its digest is first asked for)."""

    __slots__ = ("_digest", "_h")
    cheap = True

    def __init__(self, make: Callable[[], _crt.XXHash]) -> None:
        self._h = make()
        self._digest: bytes | None = None

    def update(self, data: bytes) -> None:
        # awscrt takes read-only buffers only: a view of a bytearray is copied.
        self._h.update(data if isinstance(data, bytes) else bytes(data))

    def digest(self) -> bytes:
        if self._digest is None:
            self._digest = self._h.finalize()
        return self._digest

    def b64digest(self) -> str:
        return base64.b64encode(self.digest()).decode("ascii")


def new_hasher(algorithm: str) -> Hasher:
    """A fresh hasher for one of :data:`backends.core.base.CHECKSUM_ALGORITHMS` (ValueError else)."""
    if algorithm == "CRC32":
        return _Crc(zlib.crc32, 4)
    if algorithm == "CRC32C":
        return _Crc(_crt.crc32c, 4)
    if algorithm == "CRC64NVME":
        return _Crc(_crt.crc64nvme, 8)
    if algorithm in _HASHLIB:
        return _Hash(_HASHLIB[algorithm])
    if algorithm in _XXHASH:
        return _XXHash(_XXHASH[algorithm])
    raise ValueError(f"unsupported checksum algorithm: {algorithm!r}")


def algorithm_from_header_name(name: str) -> str | None:
    """``"x-amz-checksum-crc32"`` -> ``"CRC32"``; None for any other header name.

    ``x-amz-checksum-algorithm``, ``-type`` and ``-mode`` are not checksum values: None.
    """
    lname = name.lower()
    if not lname.startswith(_HEADER_PREFIX):
        return None
    algorithm = lname[len(_HEADER_PREFIX):].upper()
    return algorithm if algorithm in CHECKSUM_ALGORITHMS else None


def header_name(algorithm: str) -> str:
    """``"CRC32"`` -> ``"x-amz-checksum-crc32"``."""
    return _HEADER_PREFIX + algorithm.lower()


def decode_value(algorithm: str, value: str) -> bytes | None:
    """The raw digest a base64 checksum value stands for, or None if it is not valid."""
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == DIGEST_SIZES[algorithm] else None
