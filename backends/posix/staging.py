"""Temp files that become objects or parts by rename, filled off the event loop."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from backends.core.base import DescribedBody
from backends.core.blocking import run_blocking
from backends.core.regions import FileRegion, take_regions
from backends.direct_io import DirectWriter
from backends.files import FILE_MODE, O_CREATE, O_READ, temp_name

T = TypeVar("T")
log = logging.getLogger(__name__)


async def settled(future: asyncio.Future[Any] | None) -> None:
    """Wait for ``future`` to end without raising its outcome (reported elsewhere)."""
    if future is None:
        return
    await asyncio.wait([future])
    if not future.cancelled():
        future.exception()  # mark retrieved


#: the largest write a body is gathered into before it is hashed and written
LARGE_WRITE_CHUNK = 4 << 20


def write_chunk(chunk_size: int, declared: int | None) -> int:
    """How many bytes of a body to gather per write: ``chunk_size``, or up to a quarter of
    the body's declared length, at most LARGE_WRITE_CHUNK. Each write is a hand-off to the worker
    pool and back; a large body in larger writes costs fewer of them, and a body's two
    writes in flight stay within its own size."""
    if declared is None:
        return chunk_size
    return max(chunk_size, min(LARGE_WRITE_CHUNK, declared // 4))


class StagedFile:
    """A temp file in the hidden area, discarded unless it was renamed into place.

    One blocking job at a time runs in the worker pool (write + MD5 of a coalesced
    chunk, a copy, the final fsync); the next chunk is gathered while the previous one is
    written, so at most two chunk buffers are held (chunks of up to LARGE_WRITE_CHUNK for
    a large body: :func:`write_chunk`). With ``direct``, the aligned middle
    of the chunks is written past the page cache (:mod:`backends.direct_io`). Callers end
    every use with ``await staged.discard()`` in a ``finally``: it waits for the job in
    flight and for a commit task, then closes the file and unlinks it unless ``committed``
    was set.
    """

    def __init__(self, tmp_dir: Path, *, chunk_size: int, durable: bool,
                 direct: bool = False) -> None:
        self.path = tmp_dir / temp_name()
        self.fd = -1
        self.offset = 0  # where this file's bytes start in ``path``
        self.size = 0
        self.committed = False
        self.commit_task: asyncio.Future[Any] | None = None
        self._chunk_size = chunk_size
        self._durable = durable
        self._direct = direct  # large writes past the page cache (backends.direct_io)
        self._md5 = hashlib.md5()
        self._known_md5: bytes | None = None
        self._buffer: list[bytes] = []  # chunks not written yet, ``_buffered`` bytes
        self._buffered = 0
        self._inflight: asyncio.Future[Any] | None = None
        self._discarding: asyncio.Future[None] | None = None
        self._adopted: list[int] = []
        self._writer: DirectWriter | None = None
        self._open_pending = False  # see open_later

    def adopt(self, fd: int) -> None:
        """Close ``fd`` (a copy source) in discard, once no job can still be using it."""
        self._adopted.append(fd)

    @property
    def md5(self) -> bytes:
        return self._known_md5 or self._md5.digest()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run one blocking job; a cancelled caller leaves it to finish (discard waits)."""
        if self._inflight is not None:
            await asyncio.shield(self._inflight)
        job = self._inflight = asyncio.ensure_future(run_blocking(fn, *args))
        return await asyncio.shield(job)

    async def open(self) -> None:
        await self._run(self._open)

    def _open(self) -> None:
        self.fd = os.open(self.path, O_CREATE, FILE_MODE)

    def open_later(self) -> None:
        """Instead of :meth:`open`: the first blocking job of :meth:`consume` or
        :meth:`finish` creates the file, so a small body costs one hand-off to the worker
        pool (create, write, fsync) instead of two."""
        self._open_pending = True

    def _opened(self) -> None:
        if self._open_pending:
            self._open_pending = False
            self._open()

    async def consume(self, body: DescribedBody) -> None:
        """Write the whole body, gathering chunks into writes of ``chunk_size``. A
        body whose MD5 is known (a cache flush) and whose bytes lie in files is copied
        file to file by the kernel, without reading it through Python."""
        md5 = body.facts.verified_md5
        if md5 is not None and not self.size and not self._buffer:
            regions = await take_regions(body)
            if regions is not None:
                await self._run(self._copy_regions, regions)
                self._known_md5 = md5
                return
        chunk_size = write_chunk(self._chunk_size, body.facts.declared_length)
        async for chunk in body:
            if not chunk:
                continue
            if type(chunk) is not bytes:  # held until written: no buffer its producer reuses
                chunk = bytes(chunk)
            self._buffer.append(chunk)
            self._buffered += len(chunk)
            if self._buffered >= chunk_size:
                await self._submit(self._take_buffer())

    def _take_buffer(self) -> list[bytes]:
        buffer, self._buffer, self._buffered = self._buffer, [], 0
        return buffer

    async def _submit(self, pieces: list[bytes]) -> None:
        # Wait for the previous write only; this one runs while the next chunk is read.
        if self._inflight is not None:
            await asyncio.shield(self._inflight)
        self._inflight = asyncio.ensure_future(run_blocking(self._write, pieces))

    def _write(self, pieces: list[bytes]) -> None:
        """Hash and write ``pieces`` (never joined into a buffer: :class:`DirectWriter`)."""
        self._opened()
        for piece in pieces:
            self._md5.update(piece)
        self.size += self._writes().write(pieces, self.offset + self.size)

    def _writes(self) -> DirectWriter:
        if self._writer is None:
            self._writer = DirectWriter(self.path, self.fd, enabled=self._direct)
        return self._writer

    def _copy_regions(self, regions: list[FileRegion]) -> None:
        self._opened()
        for region in regions:
            self._writes().copy(region.fd, region.count, src_offset=region.offset,
                                offset=self.offset + self.size)
            self.size += region.count

    async def finish(self) -> os.stat_result:
        """Write what is buffered, fsync (if durable); the file's stat."""
        return await self._run(self._finish, self._take_buffer())

    def _finish(self, buffer: list[bytes]) -> os.stat_result:
        self._opened()
        if buffer:
            self._write(buffer)
        if self._durable:
            os.fsync(self.fd)
        return os.fstat(self.fd)

    async def made_by(self, make: Callable[[Path], int | None]) -> os.stat_result | None:
        """Let ``make(path)``, a blocking job, create this file (the descriptor it returns
        is this file's); its stat, or None when ``make`` made nothing."""
        return await self._run(self._made_by, make)

    def _made_by(self, make: Callable[[Path], int | None]) -> os.stat_result | None:
        fd = make(self.path)
        if fd is None:
            return None
        self.fd = fd
        return os.fstat(fd)

    async def fill_from_files(self, sources: Sequence[tuple[Path, int, int]]
                              ) -> os.stat_result:
        """Concatenate pieces of files (path, offset, size) into this one without Python
        copies."""
        return await self._run(self._fill_from_files, list(sources))

    def _fill_from_files(self, sources: list[tuple[Path, int, int]]) -> os.stat_result:
        for path, offset, size in sources:
            src = os.open(path, O_READ)
            try:
                self._writes().copy(src, size, src_offset=offset, offset=self.size)
            finally:
                os.close(src)
            self.size += size
        return self._finish([])

    async def fill_from_fd(self, src_fd: int, size: int) -> os.stat_result:
        """Copy ``size`` bytes of an open file into this one."""
        return await self._run(self._fill_from_fd, src_fd, size)

    def _fill_from_fd(self, src_fd: int, size: int) -> os.stat_result:
        self._writes().copy(src_fd, size, src_offset=0, offset=0)
        self.size = size
        return self._finish([])

    def release(self) -> None:
        """Blocking, right after the rename that committed the file: close what is open."""
        self.committed = True
        fds, self.fd, self._adopted = [self.fd, *self._adopted], -1, []
        self._close(fds, unlink=False)

    async def discard(self) -> None:
        """Close and (unless committed) remove the file; completes even if cancelled."""
        if (self.fd < 0 and not self._adopted and self.committed
                and (self._inflight is None or self._inflight.done())):
            return  # released by the commit: nothing to wait for
        if self._discarding is None:
            self._discarding = asyncio.ensure_future(self._discard())
        await asyncio.shield(self._discarding)

    async def _discard(self) -> None:
        await settled(self._inflight)
        await settled(self.commit_task)
        fd, self.fd = self.fd, -1
        adopted, self._adopted = self._adopted, []
        self._take_buffer()
        await run_blocking(self._close, [fd, *adopted], not self.committed)

    def _close(self, fds: list[int], unlink: bool) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        for fd in fds:
            if fd >= 0:
                os.close(fd)
        if unlink:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            except OSError as exc:  # a read-only file system: the failure that brought
                # us here is what the caller must see, not this one
                log.warning("cannot remove the temporary file %s: %s", self.path, exc)


async def commit_shielded(staged: StagedFile, work: Awaitable[T]) -> T:
    """Run ``work`` (the commit of ``staged``) to its end even if the caller is cancelled."""
    task = asyncio.ensure_future(work)
    staged.commit_task = task
    return await asyncio.shield(task)
