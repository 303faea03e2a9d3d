"""BlobseerBackend: a striped, versioned blob store over N providers, as a Backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal

from backends.blobseer_like.buckets import Buckets
from backends.blobseer_like.config import BlobseerConfig
from backends.blobseer_like.gc import Collector, GcReport
from backends.blobseer_like.metrics import StoreMetrics
from backends.blobseer_like.objects import Objects
from backends.blobseer_like.provider import ProviderError
from backends.blobseer_like.ranged import RangedWrites
from backends.blobseer_like.store import BlobStore
from backends.blobseer_like.uploads import Uploads
from backends.core.base import (
    BucketInfo,
    CompletedPart,
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    PartInfo,
    ProviderInfo,
    RangeRequest,
    UploadInfo,
)
from backends.core.blocking import run_blocking
from backends.core.errors import BackendError
from backends.files import device_of
from backends.multipart import MIN_PART_SIZE


class BlobseerBackend:
    """Objects cut into chunks striped over providers; every write a new version.

    Implements Backend, MultipartBackend, CopyingBackend, PartCopyingBackend,
    RangedWriteBackend and ElasticBackend (docs/blobseer-like.md). The index lives under
    ``index_root``; :meth:`open` (blocking) opens the providers and the index, or the
    first call does. Garbage is collected in the background every ``gc_interval``.
    """

    def __init__(self, config: BlobseerConfig, *, index_root: Path,
                 durability: Literal["fsync", "none"] = "fsync",
                 min_part_size: int = MIN_PART_SIZE) -> None:
        if durability not in ("fsync", "none"):
            raise ValueError(f"durability must be 'fsync' or 'none', not {durability!r}")
        self._store = BlobStore(config, index_root=index_root, durable=durability == "fsync",
                            min_part_size=min_part_size)
        self._buckets = Buckets(self._store)
        self._objects = Objects(self._store)
        self._ranged = RangedWrites(self._store, self._objects)
        self._uploads = Uploads(self._store, self._objects)
        self._gc = Collector(self._store, config.gc_interval)
        self._opened = False
        self._started = False
        self._closed = False
        self._ready_lock = asyncio.Lock()

    @property
    def store(self) -> BlobStore:
        """The store's internals (maintenance tools and tests)."""
        return self._store

    def open(self) -> None:
        """Blocking: open (formatting new directories) and lock the providers, open the
        index (rebuilding a new one from the providers). ValueError with the reason."""
        if not self._opened:
            self._store.open()
            self._opened = True

    async def _ready(self) -> None:
        if self._closed:
            raise BackendError("The backend is closed.")
        if self._started:
            return
        async with self._ready_lock:
            if not self._opened:
                try:
                    await run_blocking(self.open)
                except ProviderError as exc:
                    raise BackendError(str(exc)) from exc
            if not self._started:
                self._gc.start()
                self._started = True

    # -- buckets -------------------------------------------------------------------------

    async def list_buckets(self) -> list[BucketInfo]:
        await self._ready()
        return await self._buckets.all()

    async def create_bucket(self, bucket: str) -> BucketInfo:
        await self._ready()
        return await self._buckets.create(bucket)

    async def head_bucket(self, bucket: str) -> BucketInfo:
        await self._ready()
        return await self._buckets.head(bucket)

    async def delete_bucket(self, bucket: str) -> None:
        await self._ready()
        await self._buckets.delete(bucket)

    # -- objects -------------------------------------------------------------------------

    async def put_object(self, bucket: str, key: str, body: DescribedBody, *, meta: ObjectMeta,
                         content_md5: bytes | None = None, if_match: str | None = None,
                         if_none_match: str | None = None) -> ObjectInfo:
        await self._ready()
        return await self._objects.put(bucket, key, body, meta=meta, content_md5=content_md5,
                                       if_match=if_match, if_none_match=if_none_match)

    async def get_object(self, bucket: str, key: str, *,
                         byte_range: RangeRequest | None = None) -> ObjectStream:
        await self._ready()
        return await self._objects.get(bucket, key, byte_range)

    async def head_object(self, bucket: str, key: str) -> ObjectInfo:
        await self._ready()
        return await self._objects.head(bucket, key)

    async def delete_object(self, bucket: str, key: str) -> None:
        await self._ready()
        await self._objects.delete(bucket, key)

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        await self._ready()
        return await self._objects.replace_metadata(bucket, key, meta)

    async def iter_objects(self, bucket: str, *, prefix: str = "",
                           start_after: str = "") -> AsyncIterator[ObjectInfo]:
        await self._ready()
        async for info in self._objects.iter(bucket, prefix, start_after):
            yield info

    async def copy_object(self, src_bucket: str, src_key: str, dst_bucket: str,
                          dst_key: str, *, meta: ObjectMeta,
                          src_etag: str | None = None) -> ObjectInfo:
        await self._ready()
        return await self._objects.copy(src_bucket, src_key, dst_bucket, dst_key, meta=meta,
                                        src_etag=src_etag)

    async def write_at(self, bucket: str, key: str, offset: int, body: DescribedBody, *,
                       meta: ObjectMeta | None = None, if_match: str | None = None,
                       append_only: bool = False) -> ObjectInfo:
        """Ranged write: ``offset`` <= size (== size appends); see RangedWriteBackend."""
        await self._ready()
        return await self._ranged.write_at(bucket, key, offset, body, meta=meta,
                                           if_match=if_match, append_only=append_only)

    # -- multipart -----------------------------------------------------------------------

    async def create_multipart_upload(self, bucket: str, key: str, *,
                                      meta: ObjectMeta) -> UploadInfo:
        await self._ready()
        return await self._uploads.create(bucket, key, meta)

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, *, content_md5: bytes | None = None) -> PartInfo:
        await self._ready()
        return await self._uploads.upload_part(bucket, key, upload_id, part_number, body,
                                               content_md5)

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, part_number: int, *,
                               byte_range: RangeRequest | None = None,
                               src_etag: str | None = None) -> PartInfo:
        await self._ready()
        return await self._uploads.upload_part_copy(
            src_bucket, src_key, bucket, key, upload_id, part_number, byte_range=byte_range,
            src_etag=src_etag)

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        await self._ready()
        return await self._uploads.list_parts(bucket, key, upload_id)

    async def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                        parts: Sequence[CompletedPart], *,
                                        if_match: str | None = None,
                                        if_none_match: str | None = None) -> ObjectInfo:
        await self._ready()
        return await self._uploads.complete(bucket, key, upload_id, list(parts),
                                            if_match=if_match, if_none_match=if_none_match)

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        await self._ready()
        await self._uploads.abort(bucket, key, upload_id)

    async def iter_multipart_uploads(self, bucket: str, *,
                                     prefix: str = "") -> AsyncIterator[UploadInfo]:
        await self._ready()
        for upload in await self._uploads.iter(bucket, prefix):
            yield upload

    # -- providers, maintenance ----------------------------------------------------------

    def providers(self) -> list[ProviderInfo]:
        return self._store.pool.infos()

    def devices(self) -> frozenset[int]:
        return frozenset(device_of(Path(p.path)) for p in self.providers())

    async def add_provider(self, path: str, *, standby: bool = False) -> ProviderInfo:
        await self._ready()
        return await self._store.pool.add(Path(path), standby=standby)

    async def activate_provider(self, provider_id: str | None = None) -> ProviderInfo | None:
        """Make a standby provider active now (the first one, or ``provider_id``)."""
        await self._ready()
        return await self._store.pool.activate(provider_id)

    async def collect_garbage(self) -> GcReport:
        """Run one garbage collection pass now."""
        await self._ready()
        return await self._gc.run()

    def register_metrics(self, registry: Any) -> None:
        registry.register(StoreMetrics(self._store, self._gc))

    def status(self) -> dict[str, object]:
        pool = self._store.pool
        return {"store": pool.store_id, "chunk_size": self._store.config.chunk_size,
                "providers": [{"id": p.id, "path": p.path, "state": p.state}
                              for p in pool.infos()],
                "burst_activations": pool.stats.activations,
                "ingest_bytes_per_s": round(pool.stats.ingest_rate),
                "gc_passes": self._gc.passes}

    async def aclose(self) -> None:
        """Stop the collector, wait for it, release the providers and the index."""
        if self._closed:
            return
        self._closed = True
        await self._gc.aclose()
        await self._store.pool.aclose()
        if self._opened:
            await run_blocking(self._store.close)
