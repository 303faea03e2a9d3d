"""Body iterators that honour the close contract even when nobody iterates them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Self

from backends.core.base import Relay, bare
from backends.core.regions import FileRegion, take_regions


class ClosingBody(AsyncIterator[bytes]):
    """An ``AsyncIterator[bytes]`` over ``source`` that runs ``on_close`` exactly once.

    Unlike an async generator, closing it before the first ``__anext__`` still closes
    ``source`` and runs ``on_close``; both run shielded from cancellation. ``on_close``
    gets ``True`` when the source was read to its end. (An upload body made of it is a
    :class:`~backends.core.base.Relay` with the facts of the body it comes from.)
    """

    __slots__ = ("_closed", "_exhausted", "_on_close", "_source")

    def __init__(self, source: AsyncIterator[bytes],
                 on_close: Callable[[bool], Awaitable[None]] | None = None) -> None:
        self._source = source
        self._on_close = on_close
        self._closed = False
        self._exhausted = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> bytes:
        if self._closed:
            raise StopAsyncIteration
        try:
            return await self._source.__anext__()
        except StopAsyncIteration:
            self._exhausted = True
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


class CountingBody(AsyncIterator[bytes]):
    """Forwards the chunks of ``source``, calling ``count(n)`` for each."""

    __slots__ = ("_count", "_source")

    def __init__(self, source: AsyncIterator[bytes], count: Callable[[int], None]) -> None:
        self._source = source
        self._count = count

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self._source.__anext__()
        self._count(len(chunk))
        return chunk

    async def take_regions(self) -> list[FileRegion] | None:
        regions = await take_regions(self._source)
        if regions is not None:
            self._count(sum(region.count for region in regions))
        return regions

    async def aclose(self) -> None:
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()


def body_of(data: bytes) -> Relay:
    """A body of ``data``, made by this process, in one chunk."""

    async def once() -> AsyncIterator[bytes]:
        if data:
            yield data
    return bare(once(), declared_length=len(data))
