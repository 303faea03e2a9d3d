"""Body iterators that honour the close contract even when nobody iterates them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from backends.base import DescribedBody, body_checksum, body_declared_length
from backends.regions import FileRegion, take_regions


class ClosingBody(DescribedBody):
    """An ``AsyncIterator[bytes]`` over ``source`` that runs ``on_close`` exactly once.

    Unlike an async generator, closing it before the first ``__anext__`` still closes
    ``source`` and runs ``on_close``; both run shielded from cancellation. ``on_close``
    gets ``True`` when the source was read to its end. ``verified_md5`` (the MD5 of the
    bytes, computed by this process as it wrote them) and ``declared_length``: see
    :class:`DescribedBody`.
    """

    __slots__ = ("_checksum", "_closed", "_exhausted", "_on_close", "_source", "checksum",
                 "declared_length", "verified_md5")

    def __init__(self, source: AsyncIterator[bytes],
                 on_close: Callable[[bool], Awaitable[None]] | None = None, *,
                 checksum: tuple[str, str] | None = None,
                 verified_md5: bytes | None = None,
                 declared_length: int | None = None) -> None:
        self._source = source
        self.verified_md5: bytes | None = verified_md5
        self.declared_length: int | None = declared_length
        self._on_close = on_close
        self._closed = False
        self._exhausted = False
        # Like the S3 layer's verifying bodies: ``checksum`` is known once exhausted.
        self._checksum = checksum
        self.checksum: tuple[str, str] | None = None

    async def __anext__(self) -> bytes:
        if self._closed:
            raise StopAsyncIteration
        try:
            return await self._source.__anext__()
        except StopAsyncIteration:
            self._exhausted = True
            self.checksum = self._checksum
            await self.aclose()
            raise
        except BaseException:
            await self.aclose()
            raise

    async def take_regions(self) -> list[FileRegion] | None:
        """The source's rest as file regions, if it has them: it then counts as read to
        its end."""
        if self._closed:
            return None
        regions = await take_regions(self._source)
        if regions is not None:
            self._exhausted = True
            self.checksum = self._checksum
        return regions

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.shield(self._cleanup())

    async def _cleanup(self) -> None:
        try:
            aclose = getattr(self._source, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            if self._on_close is not None:
                await self._on_close(self._exhausted)


class CountingBody(DescribedBody):
    """Forwards the chunks of ``source``, calling ``count(n)`` for each.

    ``checksum`` and ``declared_length`` are read from ``origin``, the request body the
    chunks come from (the S3 layer's verifying body learns its checksum once read), so a
    backend behind this wrapper stores the checksum as it would with the body itself.
    """

    __slots__ = ("_count", "_origin", "_source")

    def __init__(self, source: AsyncIterator[bytes], count: Callable[[int], None],
                 origin: object = None) -> None:
        self._source = source
        self._count = count
        self._origin = origin if origin is not None else source

    async def __anext__(self) -> bytes:
        chunk = await self._source.__anext__()
        self._count(len(chunk))
        return chunk

    async def take_regions(self) -> list[FileRegion] | None:
        regions = await take_regions(self._source)
        if regions is not None:
            self._count(sum(region.count for region in regions))
        return regions

    @property
    def checksum(self) -> tuple[str, str] | None:
        return body_checksum(self._origin)

    @property
    def declared_length(self) -> int | None:
        return body_declared_length(self._origin)

    async def aclose(self) -> None:
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()
