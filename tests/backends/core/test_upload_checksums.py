"""The object-level checks of a CompleteMultipartUpload (backends/core/upload_checksums.py)."""

from __future__ import annotations

import pytest

from backends.core.errors import BadDigest, InvalidRequestForObject
from backends.core.upload_checksums import UploadChecksum, check_object_checksum

COMPOSITE = UploadChecksum("SHA256", "COMPOSITE")
FULL = UploadChecksum("CRC32", "FULL_OBJECT")
COMPUTED = ("SHA256", "q83vEjRWeJA=-3")


@pytest.mark.parametrize("sent", ["q83vEjRWeJA=", "q83vEjRWeJA=-3", " q83vEjRWeJA= "])
def test_a_composite_matches_with_or_without_its_part_count(sent: str) -> None:
    check_object_checksum(COMPOSITE, COMPUTED, ("SHA256", sent), None)


@pytest.mark.parametrize("sent", [("SHA256", "AAAAAAAAAAA="), ("SHA256", "q83vEjRWeJA=-2"),
                                  ("SHA1", "q83vEjRWeJA=")])
def test_a_composite_that_differs_is_bad_digest(sent: tuple[str, str]) -> None:
    with pytest.raises(BadDigest):
        check_object_checksum(COMPOSITE, COMPUTED, sent, None)


def test_full_object_values_are_compared_as_they_are() -> None:
    check_object_checksum(FULL, ("CRC32", "AAAAAA=="), ("CRC32", "AAAAAA=="), "FULL_OBJECT")
    with pytest.raises(BadDigest):
        check_object_checksum(FULL, ("CRC32", "AAAAAA=="), ("CRC32", "AAAAAA==-1"), None)
    with pytest.raises(InvalidRequestForObject):
        check_object_checksum(FULL, None, None, "COMPOSITE")
