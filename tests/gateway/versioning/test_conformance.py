"""The versioning suite over posix and the cache tier (data still dirty); the s3 backend
runs it in tests/backends/s3/test_versioning.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.posix import PosixBackend
from backends.throttled import ThrottledBackend, ThrottleSettings
from gateway.cache.tier import CacheTier
from gateway.service.objects import ObjectService
from tests.gateway.cache.conftest import cache_settings
from tests.gateway.versioning.conformance import ENABLED, VersioningConformance


class TestPosixVersioning(VersioningConformance):
    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[PosixBackend]:
        store = PosixBackend(tmp_path / "root", min_part_size=self.min_part_size)
        yield store
        await store.aclose()

    async def test_records_live_in_the_hidden_area(self, service: ObjectService,
                                                   bucket: str, tmp_path: Path) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        await self.put(service, bucket, "dir/k", b"one")
        await self.put(service, bucket, "dir/k", b"two")
        root = tmp_path / "root"
        assert (root / bucket / "dir" / "k").read_bytes() == b"two"
        assert sorted(p.name for p in (root / bucket).rglob("*")) == ["dir", "k"]
        hidden = [p for p in (root / ".squall" / "internal" / bucket).rglob("*")
                  if p.is_file()]
        assert len(hidden) == 2  # the versioning status and one record
        assert any(p.read_bytes() == b"one" for p in hidden)


class TestCacheTierVersioning(VersioningConformance):
    """Through the cache tier over a backend so slow that nothing is flushed meanwhile."""

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[CacheTier]:
        inner = ThrottledBackend(
            PosixBackend(tmp_path / "root", min_part_size=self.min_part_size),
            ThrottleSettings(bandwidth_bytes_per_s=1024, burst_s=1))
        tier = CacheTier(inner, cache_settings(tmp_path / "cache", capacity=64 << 20,
                                               chunk_size=64 * 1024),
                         index_path=tmp_path / "index", min_part_size=self.min_part_size)
        await tier.start()
        yield tier
        await tier.aclose()

    async def test_versions_are_served_while_dirty(self, service: ObjectService,
                                                   bucket: str, backend: CacheTier) -> None:
        await service.put_bucket_versioning(bucket, ENABLED)
        v1 = await self.put(service, bucket, "k", b"x" * 50_000)
        await self.put(service, bucket, "k", b"y" * 50_000)
        assert backend.status()["dirty_bytes"] >= 100_000
        assert await self.get(service, bucket, "k", v1.version_id) == b"x" * 50_000
