"""The ``posix`` fixture: a PosixBackend with bucket "bkt", metadata in xattrs or sidecars."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.posix import PosixBackend
from tests.backends.posix.support import MIN_PART


@pytest.fixture(params=[True, False], ids=["xattr", "sidecar"])
async def posix(request: pytest.FixtureRequest,
                tmp_path: Path) -> AsyncIterator[PosixBackend]:
    store = PosixBackend(tmp_path / "root", min_part_size=MIN_PART, chunk_size=64 * 1024,
                         use_xattrs=request.param)
    await store.create_bucket("bkt")
    yield store
    await store.aclose()
