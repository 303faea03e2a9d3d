"""Small per-bucket configuration documents (CORS rules, bucket tags, lifecycle rules) kept in the bucket
itself as internal objects ``CONFIG_PREFIX + name``, next to the versioning status, and
cached briefly like it.

Each document is JSON ``{"magic": "squall.bucket-config", "v": 1, "name": ..., "doc": ...}``
(docs/s3-api.md); a document in a format this code does not know is a BackendError rather
than a misreading.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from backends.core.base import Backend, ObjectMeta
from backends.core.errors import BackendError, NoSuchKey, ServiceUnavailable, SlowDown
from backends.core.internal_keys import CONFIG_PREFIX
from backends.core.streams import body_of

MAGIC = "squall.bucket-config"
FORMAT = 1
NAMES = ("cors", "tagging", "lifecycle", "policy", "access")  # every document a bucket may hold (removed with the bucket)
T = TypeVar("T")
TTL = 2.0  # seconds a replica trusts a cached document, as the versioning status


class BucketConfigs:
    """Reads and writes bucket configuration documents through ``backend``."""

    def __init__(self, backend: Backend, *, ttl: float = TTL) -> None:
        self._backend = backend
        self._ttl = ttl
        self._cache: dict[tuple[str, str], tuple[Any, float]] = {}
        self._parsed: dict[tuple[str, str], tuple[Any, Any]] = {}  # (document, parsed)

    async def get(self, bucket: str, name: str) -> Any:
        """The document ``name`` of ``bucket`` (JSON value), None if it has none."""
        cached = self._cache.get((bucket, name))
        now = time.monotonic()
        if cached is not None and now - cached[1] < self._ttl:
            return cached[0]
        try:
            async with await self._backend.get_object(bucket, CONFIG_PREFIX + name) as stream:
                raw = b"".join([chunk async for chunk in stream])
            doc = _decode(bucket, name, raw)
        except NoSuchKey:
            doc = None
        except (ServiceUnavailable, SlowDown):
            if cached is None:
                raise
            return cached[0]  # the store is unreachable: the document last read stands
        self._cache[(bucket, name)] = (doc, now)
        return doc

    async def get_parsed(self, bucket: str, name: str, parse: Callable[[Any], T]) -> T | None:
        """The document ``name`` of ``bucket`` as ``parse`` makes it, None if it has none;
        ``parse`` runs once per distinct document, not once per call."""
        doc = await self.get(bucket, name)
        if doc is None:
            return None
        known = self._parsed.get((bucket, name))
        if known is not None and known[0] is doc:
            return cast(T, known[1])
        # A document read again is a new object: compared once, then known by identity.
        parsed = cast(T, known[1]) if known is not None and known[0] == doc else parse(doc)
        self._parsed[(bucket, name)] = (doc, parsed)
        return parsed

    async def put(self, bucket: str, name: str, doc: Any) -> None:
        data = json.dumps({"magic": MAGIC, "v": FORMAT, "name": name, "doc": doc}).encode()
        await self._backend.put_object(bucket, CONFIG_PREFIX + name, body_of(data),
                                       meta=ObjectMeta(content_type="application/json"))
        self._cache[(bucket, name)] = (doc, time.monotonic())

    async def delete(self, bucket: str, name: str) -> None:
        await self._backend.head_bucket(bucket)
        await self._backend.delete_object(bucket, CONFIG_PREFIX + name)
        self._cache[(bucket, name)] = (None, time.monotonic())

    async def take_all(self, bucket: str) -> dict[str, Any]:
        """Remove every document of a bucket being deleted; returns them (to restore)."""
        taken = {}
        for name in NAMES:
            self._cache.pop((bucket, name), None)
            doc = await self.get(bucket, name)
            if doc is not None:
                taken[name] = doc
                await self.delete(bucket, name)
            self._cache.pop((bucket, name), None)
        return taken

    async def restore(self, bucket: str, docs: dict[str, Any]) -> None:
        for name, doc in docs.items():
            await self.put(bucket, name, doc)

    def forget(self, bucket: str) -> None:
        for name in NAMES:
            self._cache.pop((bucket, name), None)
            self._parsed.pop((bucket, name), None)

    def created(self, bucket: str) -> None:
        """``bucket`` was just created: no documents yet (the ones written next are
        cached as they are written), without reading the store."""
        now = time.monotonic()
        for name in NAMES:
            self._cache.setdefault((bucket, name), (None, now))


def _decode(bucket: str, name: str, raw: bytes) -> Any:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise BackendError(f"The {name} configuration of bucket {bucket} is damaged.") from exc
    if not isinstance(data, dict) or data.get("magic") != MAGIC or data.get("name") != name:
        raise BackendError(f"The {name} configuration of bucket {bucket} is damaged.")
    if data.get("v") != FORMAT:
        raise BackendError(f"Bucket {bucket} keeps its {name} configuration in format "
                           f"{data.get('v')!r}; this Squall knows format {FORMAT} only.")
    return data.get("doc")
