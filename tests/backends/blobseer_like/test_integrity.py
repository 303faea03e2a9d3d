"""Every chunk is verified on every read: corruption is an error, never silent data."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.blobseer_like import BlobseerBackend
from backends.blobseer_like.fsck import check
from backends.blobseer_like.provider import ChunkCorrupted, ChunkMissing
from backends.core.base import RangeRequest
from backends.core.errors import BackendError
from tests.backends.blobseer_like.conftest import CHUNK
from tests.backends.blobseer_like.support import get, put
from tests.backends.conformance import blob, read_all


def chunk_path(store: BlobseerBackend, key: str, index: int) -> Path:
    version = store.store.index.current("bkt", key)
    assert version is not None
    ref = version.chunks[index]
    return store.store.pool.get(ref.provider).chunk_path(ref.id)


def flip(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x01
    path.write_bytes(bytes(raw))


async def test_corrupted_first_chunk_fails_the_request(store: BlobseerBackend) -> None:
    await put(store, "k", blob(3 * CHUNK))
    flip(chunk_path(store, "k", 0), 32 + 1000)
    with pytest.raises(ChunkCorrupted) as caught:
        await store.get_object("bkt", "k")
    assert isinstance(caught.value, BackendError)  # S3: 500 InternalError, logged


async def test_corrupted_later_chunk_breaks_the_stream(store: BlobseerBackend) -> None:
    data = blob(6 * CHUNK)
    await put(store, "k", data)
    flip(chunk_path(store, "k", 4), 32 + CHUNK - 1)
    stream = await store.get_object("bkt", "k")
    received = b""
    with pytest.raises(ChunkCorrupted):
        async with stream:
            async for piece in stream:
                received += piece
    assert data.startswith(received) and len(received) < 5 * CHUNK
    # A range that avoids the bad chunk is served.
    ranged = await store.get_object("bkt", "k", byte_range=RangeRequest(first=0,
                                                                      last=2 * CHUNK))
    assert await read_all(ranged) == data[:2 * CHUNK + 1]


@pytest.mark.parametrize("damage", ["header", "truncate", "extend", "remove"])
async def test_damaged_chunk_files(store: BlobseerBackend, damage: str) -> None:
    await put(store, "k", blob(2 * CHUNK))
    path = chunk_path(store, "k", 1)
    if damage == "header":
        flip(path, 0)
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[:-1])
    elif damage == "extend":
        path.write_bytes(path.read_bytes() + b"!")
    else:
        path.unlink()
    expected = ChunkMissing if damage == "remove" else ChunkCorrupted
    with pytest.raises(expected):
        await get(store, "k")
    with pytest.raises(expected):
        await get(store, "k", byte_range=RangeRequest(first=CHUNK + 5, last=CHUNK + 6))


async def test_fsck_finds_damage(store: BlobseerBackend) -> None:
    await put(store, "a", blob(3 * CHUNK))
    await put(store, "b", blob(CHUNK))
    report = check(store.store, verify_data=True)
    assert report.ok and report.chunks == 4 and report.versions == 2
    flip(chunk_path(store, "a", 2), 40)  # same size: only a data check sees it
    chunk_path(store, "b", 0).unlink()
    quick = check(store.store, verify_data=False)
    assert len(quick.missing) == 1 and not quick.corrupted and not quick.ok
    full = check(store.store, verify_data=True)
    assert len(full.missing) == 1 and len(full.corrupted) == 1
    assert "a: chunk" in full.corrupted[0] and "b: chunk" in full.missing[0]


async def test_fsck_finds_a_lost_record_copy(store: BlobseerBackend) -> None:
    await put(store, "k", b"v1")
    await put(store, "k", b"v2")  # v1's record is superseded: its copies do not matter
    version = store.store.index.current("bkt", "k")
    assert version is not None and len(version.replicas) == 2
    provider = store.store.pool.get(version.replicas[0])
    provider.record_path(version.record).unlink()
    report = check(store.store, verify_data=False)
    assert len(report.under_replicated) == 1 and "bkt/k" in report.under_replicated[0]
