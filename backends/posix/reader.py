"""Streaming an open object file: pread pieces off the event loop, close the fd once."""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from backends.core.blocking import run_blocking
from backends.core.errors import BackendError
from backends.core.regions import FileRegion
from backends.posix.staging import settled


class FileBody:
    """An async iterator over ``length`` bytes of ``fd`` from ``start``; owns the fd.

    The fd was opened before the object's metadata was read, so a concurrent overwrite
    (a rename of another file into place) never changes what this stream returns. The fd
    is closed when the stream is exhausted or closed, also if it was never iterated.
    """

    def __init__(self, fd: int, start: int, length: int, chunk_size: int) -> None:
        self._fd = fd
        self._pos = start
        self._left = length
        self._chunk = chunk_size
        self._inflight: asyncio.Future[Any] | None = None
        with contextlib.suppress(OSError, AttributeError):
            os.posix_fadvise(fd, start, length, os.POSIX_FADV_SEQUENTIAL)

    def __aiter__(self) -> FileBody:
        return self

    def _read_next(self) -> None:
        """Start reading the piece at the current position (read-ahead while the caller
        sends the previous one)."""
        size = min(self._chunk, self._left)
        self._inflight = asyncio.ensure_future(run_blocking(os.pread, self._fd, size, self._pos))

    async def __anext__(self) -> bytes:
        if self._left <= 0 or self._fd < 0:
            await self.aclose()
            raise StopAsyncIteration
        if self._inflight is None:
            self._read_next()
        assert self._inflight is not None
        # Shielded: a cancelled reader leaves the pread to finish before aclose closes the fd.
        data: bytes = await asyncio.shield(self._inflight)
        self._inflight = None
        if not data:
            await self.aclose()
            raise BackendError("The object's file became shorter while it was read.")
        self._pos += len(data)
        self._left -= len(data)
        if self._left > 0:
            self._read_next()
        return data

    async def take_regions(self) -> list[FileRegion] | None:
        """The unread rest as one region of the open file (then read to its end)."""
        if self._fd < 0 or self._inflight is not None:
            return None
        region = FileRegion(self._fd, self._pos, self._left, run_blocking)
        self._pos += self._left
        self._left = 0
        return [region]

    async def aclose(self) -> None:
        if self._fd < 0:
            return
        await settled(self._inflight)
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        # Safety net for a caller that breaks the contract and never closes the stream.
        if self._fd >= 0 and (self._inflight is None or self._inflight.done()):
            os.close(self._fd)
            self._fd = -1


class BytesBody:
    """An async iterator over bytes already read (a small object); nothing to close."""

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def __aiter__(self) -> BytesBody:
        return self

    async def __anext__(self) -> bytes:
        data, self._data = self._data, None
        if not data:
            raise StopAsyncIteration
        return data

    async def aclose(self) -> None:
        self._data = None
