"""PutObject for a body of unknown length: one upstream PUT, or a parallel multipart upload.

The body is spooled (:class:`backends.s3.spool.Spool`): in memory up to ``part_size``
bytes, beyond that to a temporary file. A body that fits goes up as one PutObject.
A larger one goes up as a multipart upload, ``concurrency`` parts at a time read back from
the spool, so memory stays below ``part_size * concurrency`` whatever the object size.

Why spool instead of sending parts while the body still arrives: upstream gives such an
object a multipart ETag, but Squall's ETag of a PUT is the MD5 of the whole object (the
cache tier verifies flushes with it, clients send it back in If-Match). Upstream metadata
is fixed when the upload is created, so the MD5 must be known by then to be recorded as
``squall-etag`` atomically with the object. Recording it afterwards (a copy onto itself)
would let readers see the object with the wrong ETag meanwhile.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import replace
from pathlib import Path

from backends.core.base import DescribedBody, ObjectInfo, ObjectMeta, final_meta
from backends.core.blocking import run_blocking
from backends.core.errors import BadDigest, EntityTooLarge
from backends.multipart import MAX_PART_NUMBER
from backends.s3.copying import abort_quietly
from backends.s3.errors import upstream
from backends.s3.meta import write_params
from backends.s3.spool import Spool
from backends.s3.upstream import Upstream, b64


async def put_object(up: Upstream, bucket: str, key: str, body: DescribedBody, *,
                     meta: ObjectMeta, content_md5: bytes | None, if_match: str | None,
                     if_none_match: str | None, spool_dir: Path | None) -> ObjectInfo:
    await up.require_bucket(bucket)
    spool = Spool(up.config.part_size, spool_dir)
    try:
        await spool.fill(body)
        meta = final_meta(meta, body)
        md5 = spool.md5.digest()
        if content_md5 is not None and content_md5 != md5:
            raise BadDigest()
        if spool.size > up.config.part_size * MAX_PART_NUMBER:
            raise EntityTooLarge(f"Objects PUT through this backend are limited to "
                                 f"{MAX_PART_NUMBER} parts of {up.config.part_size} bytes.")
        info = ObjectInfo(bucket=bucket, key=key, size=spool.size, etag=md5.hex(),
                          last_modified=0.0, meta=meta)
        async with up.commits.hold((bucket, key)):
            try:
                conditions = await up.conditions(bucket, key, if_match, if_none_match)
                if spool.in_memory:
                    await _single(up, info, spool.memory(), md5, conditions)
                else:
                    await _multipart(up, info, spool, conditions)
            finally:
                await spool.aclose()  # before the lock goes: callers see commit order
    finally:
        await spool.aclose()
    return replace(info, last_modified=time.time())


async def _single(up: Upstream, info: ObjectInfo, data: bytes, md5: bytes,
                  conditions: dict[str, str]) -> None:
    loc = up.locate(info.bucket)
    client = await up.client()
    with upstream(info.bucket, info.key):
        await client.put_object(Bucket=loc.bucket, Key=loc.key(info.key), Body=data,
                                ContentMD5=b64(md5), **write_params(info.meta), **conditions)


async def _multipart(up: Upstream, info: ObjectInfo, spool: Spool,
                     conditions: dict[str, str]) -> None:
    loc = up.locate(info.bucket)
    target = {"Bucket": loc.bucket, "Key": loc.key(info.key)}
    err = (info.bucket, info.key)
    part_size = up.config.part_size
    client = await up.client()
    with upstream(*err):
        created = await client.create_multipart_upload(
            **target, **write_params(info.meta, etag=info.etag))
    upload_id = created["UploadId"]
    slots = asyncio.Semaphore(up.config.concurrency)
    etags: dict[int, str] = {}

    async def send(number: int, offset: int) -> None:
        async with slots:  # at most `concurrency` parts in memory
            data = await spool.read(offset, part_size)
            md5 = await _md5(data)
            with upstream(*err, upload_id):
                response = await client.upload_part(**target, UploadId=upload_id,
                                                    PartNumber=number, Body=data,
                                                    ContentMD5=b64(md5))
            etags[number] = str(response["ETag"])

    try:
        async with asyncio.TaskGroup() as group:
            for number, offset in enumerate(range(0, info.size, part_size), start=1):
                group.create_task(send(number, offset))
        await spool.aclose()  # nothing left to do once committed: callers see commit order
        with upstream(*err, upload_id):
            await client.complete_multipart_upload(
                **target, UploadId=upload_id, **conditions, MultipartUpload={"Parts": [
                    {"PartNumber": n, "ETag": etags[n]} for n in sorted(etags)]})
    except BaseException as exc:
        await asyncio.shield(abort_quietly(up, target, upload_id))
        if isinstance(exc, BaseExceptionGroup):
            raise exc.exceptions[0] from exc
        raise


async def _md5(data: bytes) -> bytes:
    return await run_blocking(lambda: hashlib.md5(data).digest())
