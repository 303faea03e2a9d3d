"""The backend conformance suite run against ThrottledBackend over a real PosixBackend.

Both limits are set (high enough not to slow the suite), so every body takes the
throttled path: what a verifying body learns (its checksum) must reach the backend
through the throttle as it does without it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.posix import PosixBackend
from backends.throttled import ThrottledBackend, ThrottleSettings
from tests.backends.conformance import BackendConformance


class TestThrottledConformance(BackendConformance):
    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[ThrottledBackend]:
        inner = PosixBackend(tmp_path / "backend", min_part_size=self.min_part_size)
        throttled = ThrottledBackend(inner, ThrottleSettings(
            bandwidth_bytes_per_s=1 << 30, iops=100_000))
        yield throttled
        await throttled.aclose()
