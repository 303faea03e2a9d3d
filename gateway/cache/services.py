"""What the modules below the tier use of it, as narrow protocols.

:class:`~gateway.cache.tier.CacheTier` satisfies each of them structurally; the modules
that take one (read-through copies, cached uploads, their backend parts) never import the
tier, so the tier can import them without a cycle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import Protocol, TypeVar

from backends.core.base import Backend, ObjectStream, RangeRequest
from gateway.cache.admission import Admission
from gateway.cache.spool import Spooled
from gateway.cache.store import BK, CacheStore

T = TypeVar("T")


class ReadThroughHost(Protocol):
    """What a read-through copy needs (:func:`gateway.cache.fill.read_through`)."""

    @property
    def store(self) -> CacheStore: ...

    @property
    def write_around(self) -> bool:
        """New writes go past the cache now: no copy is kept."""
        ...


class KeyWrites(Protocol):
    """Writing one key past the cache, as the backend side of cached uploads does it
    (:class:`gateway.cache.backend_parts.BackendParts`)."""

    @property
    def inner(self) -> Backend:
        """The backend under the cache."""
        ...

    @property
    def admission(self) -> Admission:
        """The admission rule, fed with backend rates and failures."""
        ...

    async def shielded(self, work: Awaitable[T]) -> T:
        """Run a commit to completion even if the caller is cancelled meanwhile."""
        ...

    async def check_preconditions(self, bk: BK, if_match: str | None,
                                  if_none_match: str | None) -> None:
        """If-Match / If-None-Match against the newest state (caller holds the key lock)."""
        ...

    async def acquire_clean(self, bk: BK) -> None:
        """Take the key lock of ``bk`` once no unflushed record of it is left."""
        ...

    async def invalidate(self, bk: BK) -> None:
        """Drop the clean record of ``bk`` before writing past the cache."""
        ...


class UploadWrites(KeyWrites, Protocol):
    """What multipart uploads held in the cache need as well
    (:class:`gateway.cache.uploads.CachedUploads`)."""

    @property
    def write_around(self) -> bool:
        """New writes go past the cache now (phase 2, or no volume takes writes)."""
        ...

    async def admit(self, size: int | None, *, require: bool = False) -> None:
        """Before a write of ``size`` bytes: attach elastic capacity if it is due."""
        ...

    def bypass_cache(self, size: int | None, *, part: bool = False,
                     parts_cached: bool = False, parts_past: bool = False) -> bool:
        """Whether a write of ``size`` bytes goes past the cache (``part``: of an upload
        held in the cache; ``parts_cached``: which holds parts in the cache already;
        ``parts_past``: which holds parts on the backend)."""
        ...

    def unflushed_room(self) -> int:
        """Bytes the volumes hold beyond unflushed records and cached parts."""
        ...

    def count_ingest(self, n: int) -> None:
        """Count ``n`` bytes taken from clients."""
        ...

    def retry_after(self) -> float:
        """Seconds a client refused with SlowDown should wait."""
        ...

    def waits_for_room(self, size: int | None) -> bool:
        """Whether a part of ``size`` bytes that finds the cache full waits for flushes
        to make room rather than go to the backend now."""
        ...

    async def spool_admitted(self, body: AsyncIterator[bytes], content_md5: bytes | None,
                             *, wait_for_room: bool = False) -> Spooled | None:
        """Spool ``body`` into the cache, or None if it goes to the backend instead
        (``wait_for_room``: not while flushes can make room for it)."""
        ...

    async def get_object(self, bucket: str, key: str, *,
                         byte_range: RangeRequest | None = None) -> ObjectStream:
        """The newest version of an object, through the cache."""
        ...
