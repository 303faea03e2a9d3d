"""A wrapper of the storage interface writes only what it changes.

Layers compose as wrappers of the same interface (the throttle, the cluster layer...).
:class:`DelegatingBackend` forwards every :class:`~backends.core.base.Backend` operation
to the wrapped backend (``inner``) unchanged; a wrapper that offers a capability mixes in
its forwarding class too (:class:`DelegatingMultipart`, :class:`DelegatingCopying`,
:class:`DelegatingPartCopying`: a capability is claimed only where it is mixed in, since
the capability protocols are checked with ``isinstance``), then overrides the methods it
changes. Forwarding is plain methods, one call each (no ``__getattr__``); a capability the
wrapped backend lacks raises :class:`~backends.core.errors.NotImplementedByBackend`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from backends.core.base import (
    Backend,
    BucketInfo,
    CompletedPart,
    CopyingBackend,
    DescribedBody,
    MultipartBackend,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    PartCopyingBackend,
    PartInfo,
    RangeRequest,
    UploadInfo,
)
from backends.core.errors import NotImplementedByBackend


def _missing(what: str) -> NotImplementedByBackend:
    return NotImplementedByBackend(f"This backend does not support {what}.")


class DelegatingBackend:
    """A :class:`Backend` forwarding every operation to ``inner``."""

    def __init__(self, inner: Backend) -> None:
        self._inner = inner

    @property
    def inner(self) -> Backend:
        """The wrapped backend."""
        return self._inner

    async def list_buckets(self) -> list[BucketInfo]:
        return await self._inner.list_buckets()

    async def create_bucket(self, bucket: str) -> BucketInfo:
        return await self._inner.create_bucket(bucket)

    async def head_bucket(self, bucket: str) -> BucketInfo:
        return await self._inner.head_bucket(bucket)

    async def delete_bucket(self, bucket: str) -> None:
        await self._inner.delete_bucket(bucket)

    async def put_object(self, bucket: str, key: str, body: DescribedBody, *,
                         meta: ObjectMeta, content_md5: bytes | None = None,
                         if_match: str | None = None,
                         if_none_match: str | None = None) -> ObjectInfo:
        return await self._inner.put_object(bucket, key, body, meta=meta,
                                            content_md5=content_md5, if_match=if_match,
                                            if_none_match=if_none_match)

    async def get_object(self, bucket: str, key: str, *,
                         byte_range: RangeRequest | None = None) -> ObjectStream:
        return await self._inner.get_object(bucket, key, byte_range=byte_range)

    async def head_object(self, bucket: str, key: str) -> ObjectInfo:
        return await self._inner.head_object(bucket, key)

    async def delete_object(self, bucket: str, key: str) -> None:
        await self._inner.delete_object(bucket, key)

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        return await self._inner.replace_metadata(bucket, key, meta)

    def iter_objects(self, bucket: str, *, prefix: str = "",
                     start_after: str = "") -> AsyncIterator[ObjectInfo]:
        return self._inner.iter_objects(bucket, prefix=prefix, start_after=start_after)

    async def aclose(self) -> None:
        await self._inner.aclose()


class DelegatingMultipart(DelegatingBackend):
    """... and a :class:`MultipartBackend`, forwarded to ``inner``'s multipart uploads."""

    def _multipart(self) -> MultipartBackend:
        """``inner`` as a multipart backend; NotImplementedByBackend if it is not one."""
        if not isinstance(self._inner, MultipartBackend):
            raise _missing("multipart uploads")
        return self._inner

    async def create_multipart_upload(self, bucket: str, key: str, *,
                                      meta: ObjectMeta) -> UploadInfo:
        return await self._multipart().create_multipart_upload(bucket, key, meta=meta)

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, *,
                          content_md5: bytes | None = None) -> PartInfo:
        return await self._multipart().upload_part(bucket, key, upload_id, part_number, body,
                                                   content_md5=content_md5)

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        return await self._multipart().list_parts(bucket, key, upload_id)

    async def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                        parts: Sequence[CompletedPart], *,
                                        if_match: str | None = None,
                                        if_none_match: str | None = None) -> ObjectInfo:
        return await self._multipart().complete_multipart_upload(
            bucket, key, upload_id, parts, if_match=if_match, if_none_match=if_none_match)

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        await self._multipart().abort_multipart_upload(bucket, key, upload_id)

    def iter_multipart_uploads(self, bucket: str, *,
                               prefix: str = "") -> AsyncIterator[UploadInfo]:
        return self._multipart().iter_multipart_uploads(bucket, prefix=prefix)


class DelegatingCopying(DelegatingBackend):
    """... and a :class:`CopyingBackend`, forwarded to ``inner``'s server-side copy."""

    def _copying(self) -> CopyingBackend:
        if not isinstance(self._inner, CopyingBackend):
            raise _missing("server-side copies")
        return self._inner

    async def copy_object(self, src_bucket: str, src_key: str, dst_bucket: str,
                          dst_key: str, *, meta: ObjectMeta,
                          src_etag: str | None = None) -> ObjectInfo:
        return await self._copying().copy_object(src_bucket, src_key, dst_bucket, dst_key,
                                                 meta=meta, src_etag=src_etag)


class DelegatingPartCopying(DelegatingBackend):
    """... and a :class:`PartCopyingBackend`, forwarded to ``inner``'s part copies."""

    def _part_copying(self) -> PartCopyingBackend:
        if not isinstance(self._inner, PartCopyingBackend):
            raise _missing("part copies")
        return self._inner

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, part_number: int, *,
                               byte_range: RangeRequest | None = None,
                               src_etag: str | None = None) -> PartInfo:
        return await self._part_copying().upload_part_copy(
            src_bucket, src_key, bucket, key, upload_id, part_number, byte_range=byte_range,
            src_etag=src_etag)


if TYPE_CHECKING:  # mypy checks the forwarding classes against the protocols they offer
    def _conforms(plain: DelegatingBackend, multipart: DelegatingMultipart,
                  copying: DelegatingCopying, part_copying: DelegatingPartCopying
                  ) -> tuple[Backend, MultipartBackend, CopyingBackend, PartCopyingBackend]:
        return plain, multipart, copying, part_copying
