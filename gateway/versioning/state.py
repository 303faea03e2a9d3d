"""A bucket's versioning status, stored in the bucket itself and cached briefly."""

from __future__ import annotations

import enum
import time
from collections.abc import AsyncIterator

from backends.base import Backend, ObjectMeta
from backends.errors import NoSuchKey
from gateway.versioning.records import CONFIG_KEY

# How long a replica trusts its cached status. S3 itself asks clients to wait after
# enabling versioning before writing; a replica that did not make the change sees it
# within this delay (the replica that made it sees it at once).
STATUS_TTL = 2.0


class VersioningStatus(enum.Enum):
    UNVERSIONED = ""
    ENABLED = "Enabled"
    SUSPENDED = "Suspended"


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


class BucketStates:
    """Reads and writes the versioning status of buckets through ``backend``."""

    def __init__(self, backend: Backend, *, ttl: float = STATUS_TTL) -> None:
        self._backend = backend
        self._ttl = ttl
        self._cache: dict[str, tuple[VersioningStatus, float]] = {}

    async def get(self, bucket: str) -> VersioningStatus:
        cached = self._cache.get(bucket)
        now = time.monotonic()
        if cached is not None and now - cached[1] < self._ttl:
            return cached[0]
        try:
            async with await self._backend.get_object(bucket, CONFIG_KEY) as stream:
                raw = b"".join([chunk async for chunk in stream])
            status = VersioningStatus(raw.decode("ascii"))
        except NoSuchKey:
            status = VersioningStatus.UNVERSIONED
        except (UnicodeDecodeError, ValueError):
            status = VersioningStatus.ENABLED  # unreadable: never lose versions
        self._cache[bucket] = (status, now)
        return status

    async def put(self, bucket: str, status: VersioningStatus) -> None:
        if status is VersioningStatus.UNVERSIONED:
            raise ValueError("a bucket never returns to unversioned")
        await self._backend.put_object(bucket, CONFIG_KEY, _once(status.value.encode()),
                                       meta=ObjectMeta(content_type="text/plain"))
        self._cache[bucket] = (status, time.monotonic())

    async def remove(self, bucket: str) -> None:
        """Forget the status of a bucket that is being deleted."""
        await self._backend.delete_object(bucket, CONFIG_KEY)
        self._cache.pop(bucket, None)

    def forget(self, bucket: str) -> None:
        self._cache.pop(bucket, None)
