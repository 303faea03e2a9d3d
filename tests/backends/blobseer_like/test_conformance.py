"""The shared backend conformance suite over blobseer_like stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.blobseer_like import BlobseerBackend
from tests.backends.blobseer_like.conftest import make_store
from tests.backends.conformance import BackendConformance


class TestBlobseerConformance(BackendConformance):
    """Four providers, 64 KiB chunks: every object of more than 64 KiB is striped."""

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[BlobseerBackend]:
        store = make_store(tmp_path)
        yield store
        await store.aclose()


class TestBlobseerSingleProviderConformance(BackendConformance):
    """One provider (records unreplicated), 1 MiB chunks, no fsync."""

    @pytest.fixture
    async def backend(self, tmp_path: Path) -> AsyncIterator[BlobseerBackend]:
        store = make_store(tmp_path, providers=1, chunk=1 << 20, durability="none")
        yield store
        await store.aclose()
