"""PosixBackend: a directory tree other tools can read, as a complete object store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Literal

from backends.core.base import (
    BucketInfo,
    CompletedPart,
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    PartInfo,
    RangeRequest,
    UploadInfo,
)
from backends.core.blocking import run_blocking
from backends.core.errors import BackendError
from backends.files import device_of
from backends.locks import NamedLocks
from backends.multipart import MIN_PART_SIZE
from backends.oserrors import os_errors
from backends.posix import buckets
from backends.posix.hidden import HiddenArea
from backends.posix.metadata import MetaStore, detect_xattrs
from backends.posix.objects import ObjectFiles
from backends.posix.uploads import UploadStore


class PosixBackend:
    """Buckets are directories of ``root``; ``<root>/<bucket>/<key>`` is the object.

    Implements Backend, MultipartBackend, CopyingBackend, PartCopyingBackend and
    LocalBackend. The hidden area
    ``<root>/.squall`` holds temp files, records and multipart staging; keys a file
    system cannot hold verbatim are encoded (docs/posix-layout.md). ``durability="none"``
    skips every fsync. ``use_xattrs`` None detects whether the file system keeps user
    xattrs; False keeps all metadata in sidecar files. ``direct_io`` writes the bulk of
    objects and parts past the page cache where the file system allows it
    (:mod:`backends.direct_io`). The root is prepared on first use.
    """

    def __init__(self, root: Path, *, durability: Literal["fsync", "none"] = "fsync",
                 min_part_size: int = MIN_PART_SIZE, chunk_size: int = 1 << 20,
                 use_xattrs: bool | None = None, direct_io: bool = True) -> None:
        if durability not in ("fsync", "none"):
            raise ValueError(f"durability must be 'fsync' or 'none', not {durability!r}")
        if chunk_size <= 0 or min_part_size < 0:
            raise ValueError("chunk_size must be positive and min_part_size not negative")
        self._hidden = HiddenArea(Path(root))
        durable = durability == "fsync"
        self._durable = durable
        self._use_xattrs = use_xattrs
        self._metas = MetaStore(self._hidden.meta, self._hidden.tmp,
                                use_xattrs=bool(use_xattrs), durable=durable)
        self._objects = ObjectFiles(self._hidden, self._metas, NamedLocks(),
                                    durable=durable, chunk_size=chunk_size,
                                    direct_io=direct_io)
        self._uploads = UploadStore(self._hidden, self._objects, durable=durable,
                                    min_part_size=min_part_size, chunk_size=chunk_size)
        self._ready = False
        self._ready_lock = asyncio.Lock()
        self._closed = False

    @property
    def root(self) -> Path:
        return self._hidden.root

    def devices(self) -> frozenset[int]:
        return frozenset({device_of(self.root)})

    @property
    def xattrs(self) -> bool:
        """Whether records live in xattrs (known after the first operation)."""
        return self._metas.use_xattrs

    async def _ensure_ready(self) -> None:
        if self._closed:
            raise BackendError("The backend is closed.")
        if self._ready:
            return
        async with self._ready_lock:
            if not self._ready:
                with os_errors("Prepare the posix backend root"):
                    await run_blocking(self._prepare)
                self._ready = True

    def _prepare(self) -> None:
        self._hidden.prepare(durable=self._durable)
        if self._use_xattrs is None:
            self._metas.use_xattrs = detect_xattrs(self._hidden.tmp)

    # -- buckets ---------------------------------------------------------------------

    async def list_buckets(self) -> list[BucketInfo]:
        await self._ensure_ready()
        with os_errors("ListBuckets"):
            return await run_blocking(buckets.list_all, self._hidden)

    async def create_bucket(self, bucket: str) -> BucketInfo:
        await self._ensure_ready()
        async with self._uploads.bucket_locks.hold(bucket):
            with os_errors("CreateBucket"):
                return await run_blocking(buckets.create, self._hidden, bucket,
                                          durable=self._durable)

    async def head_bucket(self, bucket: str) -> BucketInfo:
        await self._ensure_ready()
        with os_errors("HeadBucket"):
            return await run_blocking(buckets.head, self._hidden, bucket)

    async def delete_bucket(self, bucket: str) -> None:
        await self._ensure_ready()
        async with self._uploads.bucket_locks.hold(bucket):
            with os_errors("DeleteBucket"):
                await run_blocking(buckets.delete, self._hidden, bucket,
                                   durable=self._durable)

    # -- objects ---------------------------------------------------------------------

    async def put_object(self, bucket: str, key: str, body: DescribedBody, *, meta: ObjectMeta,
                         content_md5: bytes | None = None, if_match: str | None = None,
                         if_none_match: str | None = None) -> ObjectInfo:
        await self._ensure_ready()
        return await self._objects.put(bucket, key, body, meta=meta, content_md5=content_md5,
                                       if_match=if_match, if_none_match=if_none_match)

    async def get_object(self, bucket: str, key: str, *,
                         byte_range: RangeRequest | None = None) -> ObjectStream:
        await self._ensure_ready()
        return await self._objects.get(bucket, key, byte_range)

    async def head_object(self, bucket: str, key: str) -> ObjectInfo:
        await self._ensure_ready()
        return await self._objects.head(bucket, key)

    async def delete_object(self, bucket: str, key: str) -> None:
        await self._ensure_ready()
        await self._objects.delete(bucket, key)

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        await self._ensure_ready()
        return await self._objects.replace_metadata(bucket, key, meta)

    async def iter_objects(self, bucket: str, *, prefix: str = "",
                           start_after: str = "") -> AsyncIterator[ObjectInfo]:
        await self._ensure_ready()
        async for info in self._objects.iter(bucket, prefix, start_after):
            yield info

    async def copy_object(self, src_bucket: str, src_key: str, dst_bucket: str,
                          dst_key: str, *, meta: ObjectMeta,
                          src_etag: str | None = None) -> ObjectInfo:
        await self._ensure_ready()
        return await self._objects.copy(src_bucket, src_key, dst_bucket, dst_key, meta=meta,
                                        src_etag=src_etag)

    # -- multipart -------------------------------------------------------------------

    async def create_multipart_upload(self, bucket: str, key: str, *,
                                      meta: ObjectMeta) -> UploadInfo:
        await self._ensure_ready()
        return await self._uploads.create(bucket, key, meta)

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, *, content_md5: bytes | None = None) -> PartInfo:
        await self._ensure_ready()
        return await self._uploads.upload_part(bucket, key, upload_id, part_number, body,
                                               content_md5)

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, part_number: int, *,
                               byte_range: RangeRequest | None = None,
                               src_etag: str | None = None) -> PartInfo:
        await self._ensure_ready()
        return await self._uploads.upload_part_copy(
            src_bucket, src_key, bucket, key, upload_id, part_number, byte_range=byte_range,
            src_etag=src_etag)

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        await self._ensure_ready()
        return await self._uploads.list_parts(bucket, key, upload_id)

    async def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                        parts: Sequence[CompletedPart], *,
                                        if_match: str | None = None,
                                        if_none_match: str | None = None) -> ObjectInfo:
        await self._ensure_ready()
        return await self._uploads.complete(bucket, key, upload_id, parts, if_match=if_match,
                                            if_none_match=if_none_match)

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        await self._ensure_ready()
        await self._uploads.abort(bucket, key, upload_id)

    async def iter_multipart_uploads(self, bucket: str, *,
                                     prefix: str = "") -> AsyncIterator[UploadInfo]:
        await self._ensure_ready()
        async for upload in self._uploads.iter(bucket, prefix):
            yield upload

    async def aclose(self) -> None:
        """Nothing stays open between calls; later calls raise BackendError."""
        self._closed = True
