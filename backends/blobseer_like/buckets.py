"""Buckets: a small record on the bucket's replica providers, and an index entry."""

from __future__ import annotations

import contextlib
import time

from backends.blobseer_like import format as fmt
from backends.blobseer_like.index import Batch
from backends.blobseer_like.store import BlobStore
from backends.core.base import BucketInfo
from backends.core.blocking import run_blocking
from backends.core.errors import BucketAlreadyOwnedByYou, BucketNotEmpty, NoSuchBucket
from backends.core.keys import check_bucket


class Buckets:
    """Bucket operations of one store; creation and deletion hold the bucket's gate."""

    def __init__(self, store: BlobStore) -> None:
        self._store = store

    async def all(self) -> list[BucketInfo]:
        entries = await run_blocking(self._store.index.buckets)
        return [BucketInfo(name, data["created_ns"] / 1e9) for name, data in entries]

    async def head(self, bucket: str) -> BucketInfo:
        check_bucket(bucket)
        data = await run_blocking(self._store.index.bucket, bucket)
        if data is None:
            raise NoSuchBucket(bucket)
        return BucketInfo(bucket, data["created_ns"] / 1e9)

    async def create(self, bucket: str) -> BucketInfo:
        check_bucket(bucket)
        store = self._store
        async with store.gate.exclusive(bucket):
            if await run_blocking(store.index.bucket, bucket) is not None:
                raise BucketAlreadyOwnedByYou(bucket)
            created = time.time_ns()
            replicas = [p.id for p in store.pool.replicas(bucket)]
            blob = fmt.bucket_json(bucket, created)
            await store.shielded(self._create(bucket, created, replicas, blob))
        return BucketInfo(bucket, created / 1e9)

    async def _create(self, bucket: str, created: int, replicas: list[str],
                      blob: bytes) -> None:
        store = self._store
        await store.on_replicas(replicas, lambda p: p.write_file(p.bucket_path(bucket), blob),
                                "CreateBucket")
        await run_blocking(store.index.write, Batch().put_bucket(bucket, created, replicas))

    async def delete(self, bucket: str) -> None:
        check_bucket(bucket)
        store = self._store
        async with store.gate.exclusive(bucket):
            data = await run_blocking(store.index.bucket, bucket)
            if data is None:
                raise NoSuchBucket(bucket)
            if await run_blocking(store.index.bucket_has_objects, bucket):
                raise BucketNotEmpty(bucket)
            # Uploads in progress are aborted with the bucket, as S3 does; new ones wait
            # for the gate, and their parts' commits find the upload gone.
            uploads = await run_blocking(store.index.uploads, bucket, "")
            await store.shielded(self._delete(bucket, data["replicas"], uploads))

    async def _delete(self, bucket: str, replicas: list[str],
                      uploads: list[fmt.Upload]) -> None:
        store = self._store
        present = [p for p in replicas if p in store.pool.by_id]
        await store.on_replicas(present, lambda p: p.unlink(p.bucket_path(bucket)),
                                "DeleteBucket")
        batch = Batch().delete_bucket(bucket)
        async with contextlib.AsyncExitStack() as held:
            for upload in uploads:
                await held.enter_async_context(store.upload_locks.hold(upload.upload_id))
                numbers = [p.part_number
                           for p in await run_blocking(store.index.parts, upload.upload_id)]
                batch.delete_upload(upload, numbers)
            await run_blocking(store.index.write, batch)
        store.garbage.set()  # the collector removes the uploads' files and chunks
