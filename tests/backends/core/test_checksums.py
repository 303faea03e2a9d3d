"""Checksum hashers against published check values and botocore's own implementations."""

from __future__ import annotations

import base64
import os

import pytest
from botocore import httpchecksum

from backends.core.base import CHECKSUM_ALGORITHMS
from backends.core.checksums import (
    DIGEST_SIZES,
    algorithm_from_header_name,
    decode_value,
    header_name,
    new_hasher,
)

# Check values over b"123456789" (the CRC catalogue's "check", FIPS 180 and RFC 1321
# digests; the xxHash ones as awscrt computes them, whose empty-input values below are
# xxHash's published ones).
CHECK = {
    "CRC32": "cbf43926",
    "CRC32C": "e3069283",
    "CRC64NVME": "ae8b14860a799888",
    "SHA1": "f7c3bc1d808e04732adf679965ccc34ca7ae3441",
    "SHA256": "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225",
    "SHA512": "d9e6762dd1c8eaf6d61b3c6192fc408d4d6d5f1176d0c29169bc24e71c3f274a"
              "d27fcd5811b313d681f7e55ec02d73d499c95455b6b5bb503acf574fba8ffe85",
    "MD5": "25f9e794323b453885f5181f1b624d0b",
    "XXHASH64": "8cb841db40e6ae83",
    "XXHASH3": "72dcb18b67a17dff",
    "XXHASH128": "33119477ede5dcd5e9716427681d5860",
}
EMPTY = {
    "CRC32": "00000000",
    "CRC32C": "00000000",
    "CRC64NVME": "0000000000000000",
    "SHA1": "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "SHA256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "SHA512": "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
              "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
    "MD5": "d41d8cd98f00b204e9800998ecf8427e",
    "XXHASH64": "ef46db3751d8e999",
    "XXHASH3": "2d06800538d394c2",
    "XXHASH128": "99aa06d3014798d86001c324468d497f",
}
BOTOCORE = {
    "CRC32": httpchecksum.Crc32Checksum,
    "CRC32C": httpchecksum.CrtCrc32cChecksum,
    "CRC64NVME": httpchecksum.CrtCrc64NvmeChecksum,
    "SHA1": httpchecksum.Sha1Checksum,
    "SHA256": httpchecksum.Sha256Checksum,
    "SHA512": httpchecksum.Sha512Checksum,
    "XXHASH64": httpchecksum.CrtXxhash64Checksum,
    "XXHASH3": httpchecksum.CrtXxhash3Checksum,
    "XXHASH128": httpchecksum.CrtXxhash128Checksum,
}


@pytest.mark.parametrize("algorithm", CHECKSUM_ALGORITHMS)
def test_check_values(algorithm: str) -> None:
    hasher = new_hasher(algorithm)
    hasher.update(b"123456789")
    assert hasher.digest().hex() == CHECK[algorithm]
    assert hasher.b64digest() == base64.b64encode(bytes.fromhex(CHECK[algorithm])).decode()
    assert new_hasher(algorithm).digest().hex() == EMPTY[algorithm]


@pytest.mark.parametrize("algorithm", CHECKSUM_ALGORITHMS)
def test_incremental_equals_one_shot_at_every_split(algorithm: str) -> None:
    data = bytes(range(256)) + b"squall" * 10
    whole = new_hasher(algorithm)
    whole.update(data)
    for cut in range(len(data) + 1):
        hasher = new_hasher(algorithm)
        hasher.update(data[:cut])
        hasher.update(data[cut:])
        assert hasher.digest() == whole.digest(), cut


@pytest.mark.parametrize("algorithm", sorted(BOTOCORE))  # botocore has no MD5 checksum
def test_matches_botocore(algorithm: str) -> None:
    data = os.urandom(300_000)
    ours, theirs = new_hasher(algorithm), BOTOCORE[algorithm]()
    for i in range(0, len(data), 65_536):
        ours.update(data[i:i + 65_536])
        theirs.update(data[i:i + 65_536])
    assert ours.b64digest() == theirs.b64digest()
    assert len(ours.digest()) == DIGEST_SIZES[algorithm]


def test_memoryview_input() -> None:
    for algorithm in CHECKSUM_ALGORITHMS:
        a, b = new_hasher(algorithm), new_hasher(algorithm)
        a.update(b"abcdef")
        b.update(memoryview(b"xxabcdefyy")[2:8])  # type: ignore[arg-type]
        assert a.digest() == b.digest()


def test_unknown_algorithm() -> None:
    for name in ("SHA3", "crc32", "", "XXHASH32"):
        with pytest.raises(ValueError):
            new_hasher(name)


@pytest.mark.parametrize(("name", "algorithm"), [
    ("x-amz-checksum-crc32", "CRC32"), ("x-amz-checksum-crc32c", "CRC32C"),
    ("x-amz-checksum-crc64nvme", "CRC64NVME"), ("x-amz-checksum-sha1", "SHA1"),
    ("X-Amz-Checksum-SHA256", "SHA256"), ("x-amz-checksum-algorithm", None),
    ("x-amz-checksum-type", None), ("x-amz-checksum-mode", None), ("x-amz-checksum-", None),
    ("x-amz-checksum-md5", "MD5"), ("x-amz-checksum-xxhash128", "XXHASH128"),
    ("x-amz-checksum-sha3", None), ("content-md5", None), ("x-amz-crc32", None)])
def test_algorithm_from_header_name(name: str, algorithm: str | None) -> None:
    assert algorithm_from_header_name(name) == algorithm


def test_header_name_round_trip() -> None:
    for algorithm in CHECKSUM_ALGORITHMS:
        assert algorithm_from_header_name(header_name(algorithm)) == algorithm


@pytest.mark.parametrize(("algorithm", "value", "valid"), [
    ("CRC32", "y/Q5Jg==", True), ("CRC32", " y/Q5Jg== ", True), ("CRC32", "y/Q5Jg", False),
    ("CRC32", "AAAAAAAA", False), ("CRC32C", "4waSgw==", True), ("CRC32C", "4waSgw==AA", False),
    ("CRC64NVME", "rosUhgp5mIg=", True), ("CRC64NVME", "y/Q5Jg==", False),
    ("SHA1", base64.b64encode(b"x" * 20).decode(), True), ("SHA1", "y/Q5Jg==", False),
    ("SHA256", base64.b64encode(b"x" * 32).decode(), True), ("SHA256", "!!!!", False),
    ("SHA256", "", False), ("CRC32", "y/Q5J\u00e9==", False), ("CRC32", "y_Q5Jg==", False)])
def test_decode_value(algorithm: str, value: str, valid: bool) -> None:
    raw = decode_value(algorithm, value)
    assert (raw is not None) == valid
    if raw is not None:
        assert len(raw) == DIGEST_SIZES[algorithm]
