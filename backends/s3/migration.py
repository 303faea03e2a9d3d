"""Moving shared-mapping bucket markers from the first layout to the current one.

The first layout marked Squall bucket ``b`` with an empty object ``P + b``: a path prefix of
every key of the bucket (``P + b + "/..."``). Stores that keep objects as a file tree
(MinIO) hold ``b`` and ``b/`` in one directory and list only the object, so listings of the
upstream bucket, and Squall's listings of ``b``, lose objects. The marker now lives at
``P + ".squall/buckets/" + b`` (:mod:`backends.s3.naming`).

Moving one marker writes the new one (``If-None-Match: *``: a marker already moved by
another process is kept), then deletes the old one; a crash in between leaves both, and
the next move deletes the old one. Every step is idempotent, so processes may move the same
markers at once. Each process sweeps once, on its first use of the upstream (one delimited
listing of the prefix: old markers and bucket prefixes, not the objects); a bucket check
that misses the new marker also looks for the old one, for markers written after the sweep
by a process of the previous version.

Only empty objects with a valid bucket name count as old markers; a migrated bucket's
creation date becomes the time of its move (S3 cannot carry a LastModified over).
"""

from __future__ import annotations

from typing import Any

from backends.core.errors import InvalidBucketName, NoSuchBucket, NoSuchKey, PreconditionFailed
from backends.core.keys import check_bucket
from backends.s3.errors import upstream
from backends.s3.naming import Naming


def _bucket_name(naming: Naming, upstream_key: str, size: int) -> str | None:
    """The bucket an upstream entry is the old marker of, or None."""
    name = naming.bucket_of_legacy_marker(upstream_key)
    if name is None or size != 0:
        return None
    try:
        check_bucket(name)
    except InvalidBucketName:
        return None
    return name


async def move_marker(client: Any, naming: Naming, bucket: str) -> None:
    """Write ``bucket``'s marker where it belongs now, then delete the old one."""
    shared = naming.shared_bucket
    try:
        with upstream(bucket, naming.marker(bucket)):
            await client.put_object(Bucket=shared, Key=naming.marker(bucket), Body=b"",
                                    IfNoneMatch="*")
    except PreconditionFailed:
        pass  # moved already (another process, or a crash before the delete)
    with upstream(bucket, naming.legacy_marker(bucket)):
        await client.delete_object(Bucket=shared, Key=naming.legacy_marker(bucket))


async def sweep(client: Any, naming: Naming) -> list[str]:
    """Move every old marker under the prefix; the buckets moved, in name order."""
    found: list[str] = []
    paginator = client.get_paginator("list_objects_v2")
    try:
        with upstream(naming.shared_bucket or ""):
            async for page in paginator.paginate(Bucket=naming.shared_bucket,
                                                 Prefix=naming.prefix, Delimiter="/"):
                for entry in page.get("Contents", []):
                    name = _bucket_name(naming, entry["Key"], int(entry.get("Size", 0)))
                    if name is not None:
                        found.append(name)
    except NoSuchBucket:
        return []  # nothing to move; each operation reports the missing bucket itself
    for name in found:
        await move_marker(client, naming, name)
    return found


async def adopt_legacy(client: Any, naming: Naming, bucket: str) -> bool:
    """If ``bucket`` has an old marker, move it and say True; else False."""
    try:
        with upstream(bucket, naming.legacy_marker(bucket)):
            response = await client.head_object(Bucket=naming.shared_bucket,
                                                 Key=naming.legacy_marker(bucket))
    except NoSuchKey:
        return False
    if _bucket_name(naming, naming.legacy_marker(bucket),
                    int(response.get("ContentLength", 0))) is None:
        return False
    await move_marker(client, naming, bucket)
    return True
