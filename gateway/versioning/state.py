"""A bucket's versioning status, stored in the bucket itself and cached briefly.

The status object is JSON ``{"magic": MAGIC, "v": FORMAT, "status": "Enabled"}``: the
format number covers the bucket's whole versioning layout (docs/versioning.md), so a
Squall that finds a format it does not know refuses the bucket rather than misread it.
"""

from __future__ import annotations

import enum
import json
import logging
import time

from backends.core.base import Backend, ObjectMeta
from backends.core.errors import BackendError, NoSuchKey, ServiceUnavailable, SlowDown
from backends.core.streams import body_of
from gateway.versioning.records import CONFIG_KEY, FORMAT

log = logging.getLogger(__name__)
MAGIC = "squall.versioning"

# How long a replica trusts its cached status. S3 itself asks clients to wait after
# enabling versioning before writing; a replica that did not make the change sees it
# within this delay (the replica that made it sees it at once).
STATUS_TTL = 2.0


class VersioningStatus(enum.Enum):
    UNVERSIONED = ""
    ENABLED = "Enabled"
    SUSPENDED = "Suspended"


def encode_status(status: VersioningStatus) -> bytes:
    return json.dumps({"magic": MAGIC, "v": FORMAT, "status": status.value}).encode()


def decode_status(bucket: str, raw: bytes) -> VersioningStatus:
    """The status stored in ``raw``; BackendError for a format this code does not know.
    A damaged object reads as Enabled: versions are never dropped on a misreading."""
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("magic") != MAGIC:
            raise ValueError("no versioning magic")
        if doc.get("v") != FORMAT:
            raise BackendError(f"Bucket {bucket} uses versioning format {doc.get('v')!r}; "
                               f"this Squall knows format {FORMAT} only.")
        status = VersioningStatus(doc["status"])
        if status is VersioningStatus.UNVERSIONED:
            raise ValueError("a stored status is never unversioned")
        return status
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("versioning status of bucket %s is unreadable (%s): taken as Enabled",
                    bucket, exc)
        return VersioningStatus.ENABLED


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
            status = decode_status(bucket, raw)
        except NoSuchKey:
            status = VersioningStatus.UNVERSIONED
        except (ServiceUnavailable, SlowDown):
            if cached is None:
                raise
            # The store is unreachable: the status last read stands until it answers
            # again (a change made through this gateway meanwhile is in the cache).
            return cached[0]
        self._cache[bucket] = (status, now)
        return status

    async def put(self, bucket: str, status: VersioningStatus) -> None:
        if status is VersioningStatus.UNVERSIONED:
            raise ValueError("a bucket never returns to unversioned")
        await self._backend.put_object(bucket, CONFIG_KEY, body_of(encode_status(status)),
                                       meta=ObjectMeta(content_type="application/json"))
        self._cache[bucket] = (status, time.monotonic())

    async def remove(self, bucket: str) -> None:
        """Forget the status of a bucket that is being deleted."""
        await self._backend.delete_object(bucket, CONFIG_KEY)
        self._cache.pop(bucket, None)

    def forget(self, bucket: str) -> None:
        self._cache.pop(bucket, None)

    def created(self, bucket: str) -> None:
        """``bucket`` was just created: unversioned, without reading the store."""
        self._cache[bucket] = (VersioningStatus.UNVERSIONED, time.monotonic())
