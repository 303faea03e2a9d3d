"""Helpers shared by the posix backend tests."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from backends.core.base import BodyFacts, DescribedBody, ObjectMeta
from backends.posix import PosixBackend
from tests.backends.conformance import body_of, collect, read_all

MIN_PART = 64 * 1024


def tree_files(base: Path) -> dict[str, bytes]:
    """Every regular file under ``base`` (relative path -> bytes), as another tool sees it."""
    found = {}
    for dirpath, _, files in os.walk(base):
        for name in files:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                found[str(path.relative_to(base))] = path.read_bytes()
    return found


async def put(store: PosixBackend, key: str, data: bytes, bucket: str = "bkt",
              meta: ObjectMeta | None = None) -> object:
    return await store.put_object(bucket, key, body_of(data), meta=meta or ObjectMeta())


async def get(store: PosixBackend, key: str, bucket: str = "bkt") -> bytes:
    return await read_all(await store.get_object(bucket, key))


async def keys(store: PosixBackend, bucket: str = "bkt") -> list[str]:
    return [info.key for info in await collect(store.iter_objects(bucket))]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Declared(DescribedBody):
    """A request body that declares its length, as the S3 layer's bodies do, given in
    pieces of ``piece`` bytes (``held``: each piece waits for it)."""

    def __init__(self, data: bytes, *, declared: int | None = None,
                 held: asyncio.Event | None = None, piece: int = MIN_PART // 4) -> None:
        super().__init__(BodyFacts(declared_length=len(data) if declared is None else declared))
        self._chunks = body_of(data, chunk=piece)
        self._held = held
        self.started = asyncio.Event()

    async def __anext__(self) -> bytes:
        chunk = await self._chunks.__anext__()
        self.started.set()
        if self._held is not None:
            await self._held.wait()
        return chunk
