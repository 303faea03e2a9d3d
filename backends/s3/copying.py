"""Server-side copies upstream: CopyObject, or UploadPartCopy above the single-copy limit.

The bytes never pass through Squall. Used by copy_object, replace_metadata (a copy onto
itself with new metadata) and to record Squall's ETag after a PUT that went multipart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from backends.core.errors import StorageError
from backends.s3.errors import upstream
from backends.s3.naming import Location
from backends.s3.upstream import Upstream

log = logging.getLogger("squall.backends.s3")


@dataclass(frozen=True, slots=True)
class CopySpec:
    """One upstream copy: source, destination and what the destination gets."""

    src: Location
    src_key: str
    src_etag: str  # upstream ETag the source must still have
    size: int
    dst: Location
    dst_key: str
    params: dict[str, Any]  # metadata and tagging of the destination (meta.write_params)


async def server_copy(up: Upstream, spec: CopySpec, *, err_bucket: str,
                      err_key: str) -> tuple[str, float]:
    """Copy upstream; returns the destination's upstream ETag and modification time."""
    client = await up.client()
    source = {"Bucket": spec.src.bucket, "Key": spec.src.key(spec.src_key)}
    target = {"Bucket": spec.dst.bucket, "Key": spec.dst.key(spec.dst_key)}
    if_match = f'"{spec.src_etag}"'
    if spec.size <= up.config.copy_threshold:
        with upstream(err_bucket, err_key):
            response = await client.copy_object(
                **target, CopySource=source, CopySourceIfMatch=if_match,
                MetadataDirective="REPLACE", TaggingDirective="REPLACE", **spec.params)
        result = response["CopyObjectResult"]
        return str(result["ETag"]).strip('"'), result["LastModified"].timestamp()
    with upstream(err_bucket, err_key):
        created = await client.create_multipart_upload(**target, **spec.params)
    upload_id = created["UploadId"]
    step = up.config.copy_part_size
    ranges = [(start, min(start + step, spec.size) - 1) for start in range(0, spec.size, step)]
    etags: dict[int, str] = {}
    limit = asyncio.Semaphore(up.config.concurrency)

    async def copy_part(number: int, first: int, last: int) -> None:
        async with limit:
            with upstream(err_bucket, err_key, upload_id):
                response = await client.upload_part_copy(
                    **target, UploadId=upload_id, PartNumber=number, CopySource=source,
                    CopySourceRange=f"bytes={first}-{last}", CopySourceIfMatch=if_match)
            etags[number] = response["CopyPartResult"]["ETag"]

    try:
        async with asyncio.TaskGroup() as group:
            for number, (first, last) in enumerate(ranges, start=1):
                group.create_task(copy_part(number, first, last))
        with upstream(err_bucket, err_key, upload_id):
            done = await client.complete_multipart_upload(
                **target, UploadId=upload_id, MultipartUpload={"Parts": [
                    {"PartNumber": n, "ETag": etags[n]} for n in sorted(etags)]})
    except BaseException as exc:
        await asyncio.shield(abort_quietly(up, target, upload_id))
        if isinstance(exc, BaseExceptionGroup):
            raise exc.exceptions[0] from exc
        raise
    return str(done["ETag"]).strip('"'), time.time()


async def abort_quietly(up: Upstream, target: dict[str, str], upload_id: str) -> None:
    """Abort an upload Squall started for itself; failures are left for lifecycle rules."""
    client = await up.client()
    try:
        with upstream(target["Bucket"], target["Key"], upload_id):
            await client.abort_multipart_upload(**target, UploadId=upload_id)
    except StorageError as exc:  # best effort: the original error matters more
        log.warning("could not abort upstream upload %s of %s/%s: %s", upload_id,
                    target["Bucket"], target["Key"], exc)
