"""Listing: ListObjectsV2 pages, then a HEAD per entry for metadata and tags.

The Backend contract returns full ObjectInfo (metadata and tags included) from a listing,
which ListObjectsV2 does not carry; HEADs (and GetObjectTagging for tagged objects) run
``list_concurrency`` at a time, and entries are yielded in key order. An entry deleted
between the page and its HEAD is skipped; one replaced meanwhile is reported as it is now.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator

from backends.core.base import BucketInfo, ObjectInfo
from backends.core.errors import InvalidKey, NoSuchBucket, NoSuchKey
from backends.core.keys import INTERNAL_PREFIX
from backends.s3.errors import error_code, upstream
from backends.s3.upstream import Upstream

# MinIO refuses a listing whose prefix it could not store as a key (an empty path segment,
# one over 255 bytes): no key it holds starts with such a prefix.
REFUSED_PREFIX = "XMinioInvalidObjectName"


async def _head_or_none(up: Upstream, bucket: str, key: str) -> ObjectInfo | None:
    try:
        return (await up.head(bucket, key)).info
    except NoSuchKey:
        return None


async def _keys(up: Upstream, bucket: str, prefix: str,
                start_after: str) -> AsyncGenerator[str, None]:
    loc = up.locate(bucket)
    client = await up.client()
    params = {"Bucket": loc.bucket, "Prefix": loc.list_position(prefix, prefix)}
    if start_after:
        params["StartAfter"] = loc.list_position(start_after, prefix)
    internal = prefix.startswith(INTERNAL_PREFIX)
    paginator = client.get_paginator("list_objects_v2")
    pages = paginator.paginate(**params).__aiter__()
    while True:
        try:
            with upstream(bucket):
                page = await pages.__anext__()
        except StopAsyncIteration:
            return
        except NoSuchBucket:
            raise NoSuchBucket(bucket) from None
        except InvalidKey as exc:
            if error_code(exc) == REFUSED_PREFIX:
                return  # a prefix no key stored there can start with
            raise
        for entry in page.get("Contents", []):
            key = loc.squall_key(entry["Key"])
            if internal or not key.startswith(INTERNAL_PREFIX):
                yield key


async def iter_objects(up: Upstream, bucket: str, *, prefix: str = "",
                       start_after: str = "") -> AsyncIterator[ObjectInfo]:
    await up.require_bucket(bucket)
    window: deque[asyncio.Task[ObjectInfo | None]] = deque()
    limit = up.config.list_concurrency
    keys = _keys(up, bucket, prefix, start_after)
    try:
        async for key in keys:
            window.append(asyncio.create_task(_head_or_none(up, bucket, key)))
            if len(window) >= limit:
                info = await window.popleft()
                if info is not None:
                    yield info
        while window:
            info = await window.popleft()
            if info is not None:
                yield info
    finally:
        for task in window:
            task.cancel()
        await asyncio.gather(*window, return_exceptions=True)
        await keys.aclose()


async def list_buckets(up: Upstream, prefix: str = "") -> list[BucketInfo]:
    """Buckets sorted by name; ``prefix`` narrows the upstream listing where supported."""
    client = await up.client()
    naming = up.naming
    found: list[BucketInfo] = []
    if naming.shared:
        paginator = client.get_paginator("list_objects_v2")
        with upstream(naming.shared_bucket or ""):
            async for page in paginator.paginate(Bucket=naming.shared_bucket,
                                                 Prefix=naming.markers + prefix,
                                                 Delimiter="/"):
                for entry in page.get("Contents", []):
                    name = naming.bucket_of_marker(entry["Key"])
                    if name is not None:
                        # Whole seconds: what HEAD (head_bucket) can report.
                        found.append(BucketInfo(name, float(int(
                            entry["LastModified"].timestamp()))))
    else:
        paginator = client.get_paginator("list_buckets")
        with upstream():
            async for page in paginator.paginate(**({"Prefix": prefix} if prefix else {})):
                for entry in page.get("Buckets", []):
                    if entry["Name"].startswith(prefix):
                        found.append(BucketInfo(entry["Name"],
                                                entry["CreationDate"].timestamp()))
    return sorted(found, key=lambda b: b.name)
