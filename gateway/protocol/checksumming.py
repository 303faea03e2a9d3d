"""A body that computes an additional checksum of the bytes passing through it.

Used where the gateway itself produces a part's bytes (UploadPartCopy streamed through it)
and the upload needs that part's checksum: once exhausted, ``checksum`` is
``(ALGORITHM, base64)``, the field of the body contract backends read
(:class:`backends.core.base.DescribedBody`).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

from backends.core.base import BodyFacts, DescribedBody
from backends.core.blocking import run_blocking
from backends.core.checksums import new_hasher

# Hash larger chunks in a worker thread (as the S3 layer does for request bodies).
_OFFLOAD_BYTES = 64 * 1024


class ChecksummingBody(DescribedBody):
    """A body over ``source`` that learns its ``algorithm`` checksum."""

    __slots__ = ("_algorithm", "_hasher", "_source")

    def __init__(self, source: AsyncIterator[bytes], algorithm: str) -> None:
        super().__init__(BodyFacts(checksum_algorithm=algorithm))
        self._source = source
        self._algorithm = algorithm
        self._hasher = new_hasher(algorithm)

    async def __anext__(self) -> bytes:
        try:
            chunk = await self._source.__anext__()
        except StopAsyncIteration:
            if self.facts.checksum is None:
                self.facts.checksum = (self._algorithm,
                                       base64.b64encode(self._hasher.digest()).decode("ascii"))
            raise
        if len(chunk) >= _OFFLOAD_BYTES:
            await run_blocking(self._hasher.update, chunk)
        else:
            self._hasher.update(chunk)
        return chunk

    async def aclose(self) -> None:
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()
