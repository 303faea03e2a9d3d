"""The versioning suite over the s3 backend: versions are objects of the upstream."""

from __future__ import annotations

import pytest

from backends.s3 import S3Backend
from tests.backends.s3.conftest import MIN_PART
from tests.backends.s3.test_conformance import moto_direct, squall_direct
from tests.gateway.versioning.conformance import VersioningConformance

__all__ = ["moto_direct", "squall_direct"]


class TestSquallUpstreamVersioning(VersioningConformance):
    min_part_size = MIN_PART

    @pytest.fixture
    def backend(self, squall_direct: S3Backend) -> S3Backend:
        return squall_direct


class TestMotoUpstreamVersioning(VersioningConformance):
    """moto_server answers 404 to a CopyObject whose source key holds a tab."""

    min_part_size = MIN_PART
    tab_key = False

    @pytest.fixture
    def backend(self, moto_direct: S3Backend) -> S3Backend:
        return moto_direct
