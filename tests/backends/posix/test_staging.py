"""How the posix backend gathers a body into writes: larger writes for a large body, up to
LARGE_WRITE_CHUNK, and the same bytes and MD5 whatever the pieces."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from backends.core.base import ObjectMeta
from backends.core.errors import NoSuchBucket
from backends.posix import PosixBackend, staging
from backends.posix.staging import LARGE_WRITE_CHUNK, write_chunk
from tests.backends.conformance import blob
from tests.backends.posix.support import MIN_PART, Declared, get

MIB = 1 << 20


def test_a_large_body_is_written_in_larger_chunks_up_to_the_limit() -> None:
    assert write_chunk(MIB, None) == MIB  # no declared length: the backend's chunk
    assert write_chunk(MIB, 100) == MIB
    assert write_chunk(MIB, 4 * MIB) == MIB
    assert write_chunk(MIB, 8 * MIB) == 2 * MIB  # a quarter of the body
    assert write_chunk(MIB, 64 * MIB) == LARGE_WRITE_CHUNK == 4 * MIB
    assert write_chunk(8 * MIB, 64 * MIB) == 8 * MIB  # never below the backend's chunk


@pytest.mark.parametrize("size", [4 * MIN_PART - 1, 4 * MIN_PART, 9 * MIB + 5])
@pytest.mark.parametrize("piece", [4096, 100 * 1024 + 3])
async def test_a_declared_body_is_stored_whole_with_its_md5(posix: PosixBackend, size: int,
                                                            piece: int) -> None:
    data = blob(size, seed=size % 97)
    info = await posix.put_object("bkt", "k", Declared(data, piece=piece), meta=ObjectMeta())
    assert info.etag == hashlib.md5(data).hexdigest()
    assert await get(posix, "k") == data


@pytest.mark.parametrize("size", [0, 4096, 3 * 64 * 1024 + 1])  # alone, and past a chunk
async def test_a_put_into_a_missing_bucket_leaves_no_file(posix: PosixBackend,
                                                           size: int) -> None:
    """The bucket is checked before the body is read: no temp file is made."""
    before = set(posix.root.rglob("*"))
    with pytest.raises(NoSuchBucket):
        await posix.put_object("gone", "k", Declared(blob(size, seed=1), piece=4096),
                               meta=ObjectMeta())
    assert set(posix.root.rglob("*")) == before


async def test_a_small_body_is_made_and_written_in_one_job(
        posix: PosixBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs: list[str] = []
    real = staging.run_blocking

    async def counted(fn: Any, *args: Any) -> Any:
        jobs.append(getattr(fn, "__name__", "?"))
        return await real(fn, *args)

    monkeypatch.setattr(staging, "run_blocking", counted)  # counts hand-offs, runs them
    await posix.put_object("bkt", "small", Declared(b"x" * 4096, piece=1024),
                           meta=ObjectMeta())
    assert jobs == ["_finish"]
    assert await get(posix, "small") == b"x" * 4096
