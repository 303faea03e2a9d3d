"""ObjectService: the gateway core between the S3 protocol and the storage stack.

It validates names, evaluates conditions against the object actually opened, copies,
lists, and exposes multipart uploads; it knows nothing of HTTP and nothing of files.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace

from backends.base import (
    Backend,
    BucketInfo,
    CompletedPart,
    CopyingBackend,
    MultipartBackend,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    PartInfo,
    RangeRequest,
    UploadInfo,
)
from backends.errors import (
    InvalidBucketName,
    InvalidKey,
    NotImplementedByBackend,
    StorageError,
)
from backends.keys import check_key as backends_check_key
from gateway.conditions import Conditions
from gateway.listing import ListPage, UploadPage, list_page, upload_page

NO_CONDITIONS = Conditions()
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def check_bucket_name(name: str) -> None:
    """S3's bucket naming rules; InvalidBucketName with the rule that failed."""
    if not _BUCKET_RE.match(name):
        raise InvalidBucketName("Bucket names must be 3-63 characters of lowercase letters, "
                                "digits, dots and hyphens, starting and ending with a letter "
                                "or digit.", resource=name)
    if ".." in name or ".-" in name or "-." in name:
        raise InvalidBucketName("Bucket names must not contain '..', '.-' or '-.'.",
                                resource=name)
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        pass
    else:
        raise InvalidBucketName("Bucket names must not be formatted as an IP address.",
                                resource=name)
    if name.startswith(("xn--", "sthree-")) or name.endswith(("-s3alias", "--ol-s3")):
        raise InvalidBucketName("Bucket names must not use a reserved prefix or suffix.",
                                resource=name)


def check_key(key: str) -> None:
    """S3's key rules plus the control characters an XML listing could not carry."""
    backends_check_key(key)
    if any(ord(c) < 32 and c not in "\t\n\r" for c in key) or "\ufffe" in key:
        raise InvalidKey("Object keys must not contain control characters.", resource=key)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    key: str
    error: StorageError | None = None


@dataclass(frozen=True, slots=True)
class CopySource:
    bucket: str
    key: str
    conditions: Conditions = NO_CONDITIONS
    byte_range: RangeRequest | None = None


class ObjectService:
    """S3 semantics over any :class:`Backend` (which may be a cache tier wrapping one)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    @property
    def backend(self) -> Backend:
        return self._backend

    def _multipart(self) -> MultipartBackend:
        if not isinstance(self._backend, MultipartBackend):
            raise NotImplementedByBackend("This backend does not support multipart uploads.")
        return self._backend

    # -- buckets -----------------------------------------------------------------------

    async def list_buckets(self) -> list[BucketInfo]:
        return sorted(await self._backend.list_buckets(), key=lambda b: b.name)

    async def create_bucket(self, bucket: str) -> BucketInfo:
        check_bucket_name(bucket)
        return await self._backend.create_bucket(bucket)

    async def head_bucket(self, bucket: str) -> BucketInfo:
        return await self._backend.head_bucket(bucket)

    async def delete_bucket(self, bucket: str) -> None:
        await self._backend.delete_bucket(bucket)

    # -- objects -----------------------------------------------------------------------

    async def put_object(self, bucket: str, key: str, body: AsyncIterator[bytes], *,
                         meta: ObjectMeta, content_md5: bytes | None = None,
                         if_match: str | None = None,
                         if_none_match: str | None = None) -> ObjectInfo:
        check_key(key)
        return await self._backend.put_object(bucket, key, body, meta=meta,
                                              content_md5=content_md5, if_match=if_match,
                                              if_none_match=if_none_match)

    async def get_object(self, bucket: str, key: str, *, byte_range: RangeRequest | None,
                         conditions: Conditions = NO_CONDITIONS) -> ObjectStream:
        """Open an object; conditions are checked on the very version opened."""
        check_key(key)
        if conditions:
            # Preconditions are evaluated before the range (412/304 win over 416).
            conditions.check_read(await self._backend.head_object(bucket, key))
        stream = await self._backend.get_object(bucket, key, byte_range=byte_range)
        try:
            conditions.check_read(stream.info)
        except BaseException:
            await stream.aclose()
            raise
        return stream

    async def head_object(self, bucket: str, key: str, *,
                          conditions: Conditions = NO_CONDITIONS) -> ObjectInfo:
        check_key(key)
        info = await self._backend.head_object(bucket, key)
        conditions.check_read(info)
        return info

    async def delete_object(self, bucket: str, key: str) -> None:
        check_key(key)
        await self._backend.delete_object(bucket, key)

    async def delete_objects(self, bucket: str, keys: Sequence[str]) -> list[DeleteResult]:
        await self._backend.head_bucket(bucket)
        results = []
        for key in keys:
            try:
                await self.delete_object(bucket, key)
                results.append(DeleteResult(key))
            except StorageError as exc:
                results.append(DeleteResult(key, exc))
        return results

    async def copy_object(self, source: CopySource, bucket: str, key: str, *,
                          meta: ObjectMeta | None, tags: dict[str, str] | None = None
                          ) -> ObjectInfo:
        """Copy ``source``; ``meta`` None keeps the source metadata (directive COPY).

        ``tags`` None keeps the source tags (tagging directive COPY).
        """
        check_key(key)
        src = await self._backend.head_object(source.bucket, source.key)
        source.conditions.check_copy_source(src)
        new_meta = meta if meta is not None else src.meta
        new_meta = replace(new_meta, tags=dict(src.meta.tags) if tags is None else tags,
                           checksum=src.meta.checksum if meta is None else new_meta.checksum)
        if isinstance(self._backend, CopyingBackend):
            return await self._backend.copy_object(source.bucket, source.key, bucket, key,
                                                   meta=new_meta, src_etag=src.etag)
        async with await self._backend.get_object(source.bucket, source.key) as stream:
            source.conditions.check_copy_source(stream.info)
            return await self._backend.put_object(bucket, key, aiter(stream), meta=new_meta)

    async def replace_tags(self, bucket: str, key: str, tags: dict[str, str]) -> ObjectInfo:
        check_key(key)
        info = await self._backend.head_object(bucket, key)
        return await self._backend.replace_metadata(bucket, key, replace(info.meta, tags=tags))

    async def list_objects(self, bucket: str, *, prefix: str, delimiter: str, max_keys: int,
                           after: str) -> ListPage:
        await self._backend.head_bucket(bucket)

        def iterate(start_after: str) -> AsyncIterator[ObjectInfo]:
            return self._backend.iter_objects(bucket, prefix=prefix, start_after=start_after)

        return await list_page(iterate, prefix=prefix, delimiter=delimiter, max_keys=max_keys,
                               after=after)

    # -- multipart ---------------------------------------------------------------------

    async def create_multipart_upload(self, bucket: str, key: str, *,
                                      meta: ObjectMeta) -> UploadInfo:
        check_key(key)
        await self._backend.head_bucket(bucket)
        return await self._multipart().create_multipart_upload(bucket, key, meta=meta)

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: AsyncIterator[bytes], *,
                          content_md5: bytes | None = None) -> PartInfo:
        return await self._multipart().upload_part(bucket, key, upload_id, part_number, body,
                                                   content_md5=content_md5)

    async def upload_part_copy(self, source: CopySource, bucket: str, key: str,
                               upload_id: str, part_number: int) -> PartInfo:
        multipart = self._multipart()
        # Fail on an unknown upload before reading any source bytes.
        await multipart.list_parts(bucket, key, upload_id)
        async with await self._backend.get_object(source.bucket, source.key,
                                                  byte_range=source.byte_range) as stream:
            source.conditions.check_copy_source(stream.info)
            return await multipart.upload_part(bucket, key, upload_id, part_number,
                                               aiter(stream))

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

    async def list_multipart_uploads(self, bucket: str, *, prefix: str, delimiter: str,
                                     max_uploads: int, key_marker: str,
                                     upload_id_marker: str) -> UploadPage:
        await self._backend.head_bucket(bucket)
        uploads = self._multipart().iter_multipart_uploads(bucket, prefix=prefix)
        return await upload_page(uploads, prefix=prefix, delimiter=delimiter,
                                 max_uploads=max_uploads, key_marker=key_marker,
                                 upload_id_marker=upload_id_marker)
