"""Buckets: a small record on the bucket's replica providers, and an index entry."""

from __future__ import annotations

import time

from backends.base import BucketInfo
from backends.blobseer_like import format as fmt
from backends.blobseer_like.index import Batch
from backends.blobseer_like.store import Store
from backends.blocking import run_blocking
from backends.errors import BucketAlreadyOwnedByYou, BucketNotEmpty, NoSuchBucket
from backends.posix.layout import check_bucket


class Buckets:
    """Bucket operations of one store; creation and deletion hold the bucket's gate."""

    def __init__(self, store: Store) -> None:
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
            if await run_blocking(store.index.bucket_in_use, bucket):
                raise BucketNotEmpty(bucket)
            await store.shielded(self._delete(bucket, data["replicas"]))

    async def _delete(self, bucket: str, replicas: list[str]) -> None:
        store = self._store
        present = [p for p in replicas if p in store.pool.by_id]
        await store.on_replicas(present, lambda p: p.unlink(p.bucket_path(bucket)),
                                "DeleteBucket")
        await run_blocking(store.index.write, Batch().delete_bucket(bucket))
        store.garbage.set()
