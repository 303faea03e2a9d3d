"""A body of unknown length held until its length (and MD5) are known.

Bytes stay in memory up to ``memory_limit``; beyond that they go to an unlinked temporary
file (written and read in worker threads), so memory stays bounded whatever the size.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

from backends.core.blocking import run_blocking


class Spool:
    """Collects a body; then hands it out whole (small) or in slices (large)."""

    def __init__(self, memory_limit: int, directory: Path | None) -> None:
        self._limit = memory_limit
        self._dir = directory
        self._memory = bytearray()
        self._file: IO[bytes] | None = None
        self.size = 0
        self.md5 = hashlib.md5()

    @property
    def in_memory(self) -> bool:
        return self._file is None

    async def fill(self, body: AsyncIterator[bytes]) -> None:
        async for chunk in body:
            await self.write(chunk)
        if self._file is not None:
            await run_blocking(self._file.flush)

    async def write(self, chunk: bytes) -> None:
        self.md5.update(chunk)
        self.size += len(chunk)
        if self._file is None and len(self._memory) + len(chunk) <= self._limit:
            self._memory += chunk
            return
        if self._file is None:
            self._file = await run_blocking(self._open)
            pending, self._memory = bytes(self._memory), bytearray()
            await run_blocking(self._file.write, pending)
        await run_blocking(self._file.write, chunk)

    def _open(self) -> IO[bytes]:
        if self._dir is not None:
            self._dir.mkdir(parents=True, exist_ok=True)
        return tempfile.TemporaryFile(dir=self._dir)

    def memory(self) -> bytes:
        assert self._file is None
        return bytes(self._memory)

    async def file(self) -> IO[bytes]:
        """The spooled file, positioned at its start (spilled spools only)."""
        assert self._file is not None
        await run_blocking(self._file.seek, 0, os.SEEK_SET)
        return self._file

    async def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset`` (safe to call concurrently)."""
        if self._file is None:
            return bytes(self._memory[offset:offset + length])
        return await run_blocking(os.pread, self._file.fileno(), length, offset)

    async def aclose(self) -> None:
        self._memory = bytearray()
        if self._file is not None:
            await run_blocking(self._file.close)
            self._file = None
