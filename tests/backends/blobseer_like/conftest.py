"""Stores on temporary provider directories (real files, real RocksDB)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from backends.blobseer_like import BlobseerBackend
from backends.blobseer_like.config import BlobseerConfig

CHUNK = 64 * 1024
MIN_PART = 64 * 1024

Factory = Callable[..., BlobseerBackend]


def make_store(tmp_path: Path, *, providers: int = 4, chunk: int = CHUNK,
               index: str = "data", gc_interval: float = 0, durability: str = "fsync",
               **options: Any) -> BlobseerBackend:
    """A store over ``providers`` directories ``tmp_path/p0..``; nothing opened yet."""
    config = BlobseerConfig(
        providers=tuple(tmp_path / f"p{i}" for i in range(providers)), chunk_size=chunk,
        gc_interval=gc_interval, **options)
    return BlobseerBackend(config, index_root=tmp_path / index / "blobseer",
                           durability=durability, min_part_size=MIN_PART)  # type: ignore[arg-type]


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Factory]:
    """Build stores (closed at the end of the test)."""
    made: list[BlobseerBackend] = []

    def factory(**kwargs: Any) -> BlobseerBackend:
        store = make_store(tmp_path, **kwargs)
        made.append(store)
        return store

    yield factory
    for store in made:
        await store.aclose()


@pytest.fixture
async def store(make: Factory) -> BlobseerBackend:
    """A 4-provider store with 64 KiB chunks and the bucket "bkt"."""
    backend = make()
    await backend.create_bucket("bkt")
    return backend
