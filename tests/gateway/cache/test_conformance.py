"""The backend conformance suite run against CacheTier over a real PosixBackend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.posix import PosixBackend
from gateway.cache.tier import CacheTier
from tests.backends.conformance import BackendConformance
from tests.gateway.cache.conftest import cache_settings


class TestCacheTierConformance(BackendConformance):
    """Write-back (phase 1): every write lands in the cache first."""

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[CacheTier]:
        inner = PosixBackend(tmp_path / "backend", min_part_size=self.min_part_size)
        tier = CacheTier(inner, cache_settings(tmp_path / "cache", capacity=64 << 20,
                                               chunk_size=64 * 1024),
                         index_path=tmp_path / "index", min_part_size=self.min_part_size)
        await tier.start()
        yield tier
        await tier.aclose()


class TestSmallCacheConformance(BackendConformance):
    """A cache smaller than many test objects: pass-through, eviction and backpressure
    are exercised by the same contracts."""

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[CacheTier]:
        inner = PosixBackend(tmp_path / "backend", min_part_size=self.min_part_size)
        tier = CacheTier(inner, cache_settings(tmp_path / "cache", capacity=600_000,
                                               backpressure_timeout_s=30),
                         index_path=tmp_path / "index", min_part_size=self.min_part_size)
        await tier.start()
        yield tier
        await tier.aclose()
