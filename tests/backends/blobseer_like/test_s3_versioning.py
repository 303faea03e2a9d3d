"""The S3 versioning suite over blobseer_like: archived versions share the chunks of the
version they were copied from, so keeping a version costs no data copy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.blobseer_like import BlobseerBackend
from gateway.service.objects import ObjectService
from tests.backends.blobseer_like.conftest import make_store
from tests.gateway.versioning.conformance import ENABLED, VersioningConformance


class TestBlobseerVersioning(VersioningConformance):
    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[BlobseerBackend]:
        store = make_store(tmp_path)
        yield store
        await store.aclose()

    async def test_keeping_a_version_copies_no_chunk(self, service: ObjectService,
                                                     bucket: str, tmp_path: Path) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        await self.put(service, bucket, "big", b"a" * 1_000_000)

        def chunk_bytes() -> int:
            return sum(p.stat().st_size for p in tmp_path.rglob("*")
                       if p.is_file() and "chunk" in str(p))
        before = chunk_bytes()
        await self.put(service, bucket, "big", b"b" * 10)  # archives the 1 MB version
        assert chunk_bytes() - before < 100_000
        assert await self.get(service, bucket, "big") == b"b" * 10
