"""Bucket operations in both mappings (see :mod:`backends.s3.naming`)."""

from __future__ import annotations

import time

from backends.core.base import BucketInfo
from backends.core.errors import (
    BucketAlreadyOwnedByYou,
    BucketNotEmpty,
    NoSuchBucket,
    NoSuchUpload,
    PreconditionFailed,
)
from backends.s3.errors import upstream
from backends.s3.listing import list_buckets
from backends.s3.upstream import Upstream


async def create_bucket(up: Upstream, bucket: str) -> BucketInfo:
    client = await up.client()
    naming = up.naming
    if naming.shared:
        try:
            with upstream(bucket):
                await client.put_object(Bucket=naming.shared_bucket, Key=naming.marker(bucket),
                                        Body=b"", IfNoneMatch="*")
        except PreconditionFailed as exc:  # the marker exists
            raise BucketAlreadyOwnedByYou(bucket) from exc
        return await head_bucket(up, bucket)
    if await up.bucket_exists(bucket):  # us-east-1 re-creation succeeds quietly on AWS
        raise BucketAlreadyOwnedByYou(bucket)
    params = {}
    if up.config.region != "us-east-1":
        params["CreateBucketConfiguration"] = {"LocationConstraint": up.config.region}
    with upstream(bucket):
        await client.create_bucket(Bucket=bucket, **params)
    return BucketInfo(bucket, time.time())  # listing the account's buckets would be costly


async def head_bucket(up: Upstream, bucket: str) -> BucketInfo:
    client = await up.client()
    naming = up.naming
    if naming.shared:
        response = await up.head_marker(bucket)
        if response is None:
            raise NoSuchBucket(bucket)
        return BucketInfo(bucket, float(int(response["LastModified"].timestamp())))
    with upstream(bucket):
        await client.head_bucket(Bucket=bucket)
    for info in await list_buckets(up, bucket):  # HeadBucket reports no creation date
        if info.name == bucket:
            return info
    return BucketInfo(bucket, time.time())


async def delete_bucket(up: Upstream, bucket: str) -> None:
    """Delete a bucket without objects; its multipart uploads are aborted first, as S3
    does (an upload started meanwhile makes the upstream refuse: BucketNotEmpty)."""
    client = await up.client()
    loc = up.locate(bucket)
    if up.naming.shared:
        await head_bucket(up, bucket)
    with upstream(bucket):
        listed = await client.list_objects_v2(Bucket=loc.bucket, Prefix=loc.prefix,
                                              MaxKeys=1)
    if listed.get("KeyCount", len(listed.get("Contents", []))):
        raise BucketNotEmpty(bucket)
    await _abort_uploads(up, bucket)
    with upstream(bucket):
        if up.naming.shared:
            await client.delete_object(Bucket=loc.bucket, Key=up.naming.marker(bucket))
        else:
            await client.delete_bucket(Bucket=bucket)


async def _abort_uploads(up: Upstream, bucket: str) -> None:
    """Abort every upstream multipart upload of ``bucket`` (already gone ones are fine)."""
    client = await up.client()
    loc = up.locate(bucket)
    paginator = client.get_paginator("list_multipart_uploads")
    with upstream(bucket):
        found = [(u["Key"], u["UploadId"])
                 async for page in paginator.paginate(Bucket=loc.bucket, Prefix=loc.prefix)
                 for u in page.get("Uploads", [])]
    for key, upload_id in found:
        try:
            with upstream(bucket, loc.squall_key(key), upload_id):
                await client.abort_multipart_upload(Bucket=loc.bucket, Key=key,
                                                    UploadId=upload_id)
        except NoSuchUpload:
            pass
