"""Token-bucket throttling of everything sent to or read from a backend.

:class:`ThrottledBackend` wraps any backend (under the cache tier or without it) and
charges one operation per call and every body byte as it flows, in both directions.
It also counts what it let through (``bytes_sent``, ``bytes_received``, ``operations``),
which tests and the writeback controller use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from pydantic import BaseModel, ConfigDict, Field

from backends.core.base import (
    Backend,
    BucketInfo,
    CompletedPart,
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    PartInfo,
    RangeRequest,
    Relay,
    UploadInfo,
)
from backends.core.delegating import (
    DelegatingCopying,
    DelegatingMultipart,
    DelegatingPartCopying,
)
from backends.core.streams import ClosingBody
from backends.core.unit_types import Rate
from backends.throttle import TokenBucket

_LIST_PAGE = 1000  # a listing costs one operation per this many entries, as S3 pages


class ThrottleSettings(BaseModel):
    """Limits on what is sent to or read from a backend; ``None`` means unlimited."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bandwidth_bytes_per_s: Rate | None = None
    #: Operations per second, > 0 (also written as a rate: "10k").
    iops: Rate | None = None
    #: Bucket depth in seconds of the rate (how large a burst passes unthrottled).
    burst_s: float = Field(default=0.1, gt=0)

    @property
    def enabled(self) -> bool:
        return self.bandwidth_bytes_per_s is not None or self.iops is not None


class ThrottledBackend(DelegatingMultipart, DelegatingCopying, DelegatingPartCopying):
    """A backend whose traffic is limited by ``settings`` (bytes/s and operations/s).
    Every operation is charged, so each is written here; capabilities the wrapped backend
    lacks raise NotImplementedByBackend (:mod:`backends.core.delegating`)."""

    def __init__(self, inner: Backend, settings: ThrottleSettings) -> None:
        super().__init__(inner)
        self.settings = settings
        rate = settings.bandwidth_bytes_per_s
        iops = settings.iops
        self._bytes = TokenBucket(rate, max(rate * settings.burst_s, 1.0)) if rate else None
        self._ops = TokenBucket(iops, max(iops * settings.burst_s, 1.0)) if iops else None
        self.bytes_sent = 0
        self.bytes_received = 0
        self.operations = 0

    @property
    def bandwidth(self) -> float | None:
        """The configured byte rate, or None when unlimited."""
        return self.settings.bandwidth_bytes_per_s

    async def _op(self) -> None:
        self.operations += 1
        if self._ops is not None:
            await self._ops.acquire(1)

    async def _send(self, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in body:
            self.bytes_sent += len(chunk)
            if self._bytes is not None:
                await self._bytes.acquire(len(chunk))
            yield chunk

    async def _receive(self, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in body:
            if self._bytes is not None:
                await self._bytes.acquire(len(chunk))
            self.bytes_received += len(chunk)
            yield chunk

    # -- buckets -------------------------------------------------------------------
    async def list_buckets(self) -> list[BucketInfo]:
        await self._op()
        return await self._inner.list_buckets()

    async def create_bucket(self, bucket: str) -> BucketInfo:
        await self._op()
        return await self._inner.create_bucket(bucket)

    async def head_bucket(self, bucket: str) -> BucketInfo:
        await self._op()
        return await self._inner.head_bucket(bucket)

    async def delete_bucket(self, bucket: str) -> None:
        await self._op()
        await self._inner.delete_bucket(bucket)

    # -- objects -------------------------------------------------------------------
    async def put_object(self, bucket: str, key: str, body: DescribedBody, *,
                         meta: ObjectMeta, content_md5: bytes | None = None,
                         if_match: str | None = None,
                         if_none_match: str | None = None) -> ObjectInfo:
        await self._op()
        sent = Relay(ClosingBody(self._send(body)), body.facts)
        try:
            return await self._inner.put_object(
                bucket, key, sent, meta=meta, content_md5=content_md5, if_match=if_match,
                if_none_match=if_none_match)
        finally:
            await sent.aclose()

    async def get_object(self, bucket: str, key: str, *,
                         byte_range: RangeRequest | None = None) -> ObjectStream:
        await self._op()
        stream = await self._inner.get_object(bucket, key, byte_range=byte_range)
        received = ClosingBody(self._receive(aiter(stream)), lambda _done: stream.aclose())
        return ObjectStream(stream.info, received, stream.byte_range)

    async def head_object(self, bucket: str, key: str) -> ObjectInfo:
        await self._op()
        return await self._inner.head_object(bucket, key)

    async def delete_object(self, bucket: str, key: str) -> None:
        await self._op()
        await self._inner.delete_object(bucket, key)

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        await self._op()
        return await self._inner.replace_metadata(bucket, key, meta)

    async def iter_objects(self, bucket: str, *, prefix: str = "",
                           start_after: str = "") -> AsyncIterator[ObjectInfo]:
        await self._op()
        count = 0
        async for info in self._inner.iter_objects(bucket, prefix=prefix,
                                                    start_after=start_after):
            count += 1
            if count % _LIST_PAGE == 0:
                await self._op()
            yield info

    # -- multipart -----------------------------------------------------------------
    async def create_multipart_upload(self, bucket: str, key: str, *,
                                      meta: ObjectMeta) -> UploadInfo:
        inner = self._multipart()
        await self._op()
        return await inner.create_multipart_upload(bucket, key, meta=meta)

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, *,
                          content_md5: bytes | None = None) -> PartInfo:
        inner = self._multipart()
        await self._op()
        sent = Relay(ClosingBody(self._send(body)), body.facts)
        try:
            return await inner.upload_part(
                bucket, key, upload_id, part_number, sent, content_md5=content_md5)
        finally:
            await sent.aclose()

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        inner = self._multipart()
        await self._op()
        return await inner.list_parts(bucket, key, upload_id)

    async def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                        parts: Sequence[CompletedPart], *,
                                        if_match: str | None = None,
                                        if_none_match: str | None = None) -> ObjectInfo:
        inner = self._multipart()
        await self._op()
        return await inner.complete_multipart_upload(
            bucket, key, upload_id, parts, if_match=if_match, if_none_match=if_none_match)

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        inner = self._multipart()
        await self._op()
        await inner.abort_multipart_upload(bucket, key, upload_id)

    async def iter_multipart_uploads(self, bucket: str, *,
                                     prefix: str = "") -> AsyncIterator[UploadInfo]:
        inner = self._multipart()
        await self._op()
        async for upload in inner.iter_multipart_uploads(
                bucket, prefix=prefix):
            yield upload

    # -- copy ----------------------------------------------------------------------
    async def copy_object(self, src_bucket: str, src_key: str, dst_bucket: str,
                          dst_key: str, *, meta: ObjectMeta,
                          src_etag: str | None = None) -> ObjectInfo:
        inner = self._copying()
        await self._op()
        return await inner.copy_object(
            src_bucket, src_key, dst_bucket, dst_key, meta=meta, src_etag=src_etag)

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, part_number: int, *,
                               byte_range: RangeRequest | None = None,
                               src_etag: str | None = None) -> PartInfo:
        inner = self._part_copying()
        await self._op()
        return await inner.upload_part_copy(
            src_bucket, src_key, bucket, key, upload_id, part_number, byte_range=byte_range,
            src_etag=src_etag)
