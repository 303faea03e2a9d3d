"""Helpers for blobseer_like tests: bodies, reads, and what lies on the providers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.blobseer_like import BlobseerBackend
from backends.core.base import ObjectInfo, ObjectMeta
from tests.backends.conformance import body_of, read_all


@dataclass(frozen=True)
class ChunkFile:
    provider: str
    path: Path
    size: int  # data bytes (the file minus its header)


async def put(store: BlobseerBackend, key: str, data: bytes, bucket: str = "bkt",
              **kwargs: Any) -> ObjectInfo:
    kwargs.setdefault("meta", ObjectMeta())
    return await store.put_object(bucket, key, body_of(data, 50_000), **kwargs)


async def get(store: BlobseerBackend, key: str, bucket: str = "bkt", **kwargs: Any) -> bytes:
    return await read_all(await store.get_object(bucket, key, **kwargs))


def chunk_files(store: BlobseerBackend) -> list[ChunkFile]:
    """Every chunk file on every provider."""
    out = []
    for provider in store.store.pool.by_id.values():
        for chunk_id in provider.chunk_ids():
            path = provider.chunk_path(chunk_id)
            out.append(ChunkFile(provider.id, path, path.stat().st_size - 32))
    return out


def stored_bytes(store: BlobseerBackend) -> int:
    return sum(c.size for c in chunk_files(store))


def version_chunks(store: BlobseerBackend, key: str, bucket: str = "bkt") -> list[str]:
    version = store.store.index.current(bucket, key)
    assert version is not None
    return [c.id for c in version.chunks]
