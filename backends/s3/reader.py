"""Object bodies: an upstream GetObject response streamed in chunks, closed with the stream."""

from __future__ import annotations

from typing import Any

from backends.s3.errors import upstream

CHUNK_SIZE = 256 * 1024


class UpstreamBody:
    """An ``AsyncIterator[bytes]`` over an aiobotocore StreamingBody.

    ``aclose()`` releases the connection whether or not anything was read (a generator
    would skip its cleanup when closed before its first step); a body not read to the end
    cannot go back to the pool, so its connection is closed.
    """

    __slots__ = ("_body", "_bucket", "_chunk_size", "_key")

    def __init__(self, streaming_body: Any, bucket: str, key: str,
                 chunk_size: int = CHUNK_SIZE) -> None:
        self._body: Any = streaming_body
        self._bucket = bucket
        self._key = key
        self._chunk_size = chunk_size

    def __aiter__(self) -> UpstreamBody:
        return self

    async def __anext__(self) -> bytes:
        if self._body is None:
            raise StopAsyncIteration
        try:
            with upstream(self._bucket, self._key):
                chunk: bytes = await self._body.read(self._chunk_size)
        except BaseException:
            await self.aclose()
            raise
        if not chunk:
            await self.aclose()
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            body.close()
