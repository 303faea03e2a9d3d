"""S3Backend: Backend, MultipartBackend, CopyingBackend and PartCopyingBackend over an
upstream S3 service."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from backends.core.base import (
    BucketInfo,
    ByteRange,
    CompletedPart,
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    PartInfo,
    RangeRequest,
    UploadInfo,
)
from backends.core.errors import (
    ConditionalRequestConflict,
    InvalidRange,
    NoSuchBucket,
    NoSuchKey,
    PreconditionFailed,
    ServiceUnavailable,
    StorageError,
)
from backends.s3 import buckets, listing, writer
from backends.s3.config import S3Config
from backends.s3.copying import CopySpec, server_copy
from backends.s3.errors import upstream
from backends.s3.meta import describe, tags_from, write_params
from backends.s3.reader import UpstreamBody
from backends.s3.uploads import Uploads
from backends.s3.upstream import Upstream

_COPY_ATTEMPTS = 3
log = logging.getLogger(__name__)


def _range_header(request: RangeRequest) -> str:
    if request.suffix is not None:
        return f"bytes=-{request.suffix}"
    last = "" if request.last is None else str(request.last)
    return f"bytes={request.first or 0}-{last}"


def _served(response: dict[str, Any]) -> tuple[int, ByteRange | None]:
    """(object size, range served) from a GetObject response."""
    content_range = response.get("ContentRange")
    if not content_range:
        return int(response.get("ContentLength", 0)), None
    spec, _, total = str(content_range).removeprefix("bytes ").partition("/")
    first, _, last = spec.partition("-")
    return int(total), ByteRange(int(first), int(last))


class S3Backend:
    """Squall's persistent store on any S3 service (AWS, MinIO, Ceph RGW, another Squall).

    ``spool_dir`` holds multipart parts larger than ``config.part_size`` while they are
    being sent (UploadPart needs the length up front).
    """

    def __init__(self, config: S3Config, *, spool_dir: Path | None = None) -> None:
        self.config = config
        self._up = Upstream(config)
        self._spool_dir = spool_dir
        self._uploads = Uploads(self._up, spool_dir)
        self._probe_problem: str | None = None  # the last probe's answer (logged on change)

    # -- buckets -------------------------------------------------------------------------

    async def list_buckets(self) -> list[BucketInfo]:
        return await listing.list_buckets(self._up)

    async def create_bucket(self, bucket: str) -> BucketInfo:
        return await buckets.create_bucket(self._up, bucket)

    async def head_bucket(self, bucket: str) -> BucketInfo:
        return await buckets.head_bucket(self._up, bucket)

    async def delete_bucket(self, bucket: str) -> None:
        await buckets.delete_bucket(self._up, bucket)

    # -- objects -------------------------------------------------------------------------

    async def put_object(self, bucket: str, key: str, body: DescribedBody, *, meta: ObjectMeta,
                         content_md5: bytes | None = None, if_match: str | None = None,
                         if_none_match: str | None = None) -> ObjectInfo:
        return await writer.put_object(self._up, bucket, key, body, meta=meta,
                                       content_md5=content_md5, if_match=if_match,
                                       if_none_match=if_none_match, spool_dir=self._spool_dir)

    async def _get(self, bucket: str, key: str, **params: Any) -> dict[str, Any]:
        loc = self._up.locate(bucket)
        client = await self._up.client()
        try:
            with upstream(bucket, key):
                response: dict[str, Any] = await client.get_object(
                    Bucket=loc.bucket, Key=loc.key(key), **params)
        except InvalidRange as exc:
            size = (await self._up.head(bucket, key, with_tags=False)).info.size
            raise InvalidRange(size) from exc
        except (NoSuchKey, NoSuchBucket) as exc:
            raise await self._up.missing(bucket, key, exc) from exc
        return response

    async def get_object(self, bucket: str, key: str, *,
                         byte_range: RangeRequest | None = None) -> ObjectStream:
        params = {"Range": _range_header(byte_range)} if byte_range is not None else {}
        response = await self._get(bucket, key, **params)
        try:
            size, served = _served(response)
            resolved = byte_range.resolve(size) if byte_range is not None else None
            if resolved != served:  # an upstream that reads ranges differently
                response["Body"].close()
                response = await self._get(
                    bucket, key, IfMatch=response["ETag"],
                    **({"Range": f"bytes={resolved.start}-{resolved.end}"} if resolved else {}))
            tags: dict[str, str] = {}
            if int(response.get("TagCount") or 0):
                loc = self._up.locate(bucket)
                client = await self._up.client()
                with upstream(bucket, key):
                    tags = tags_from(await client.get_object_tagging(Bucket=loc.bucket,
                                                                     Key=loc.key(key)))
            info = describe(response, bucket, key, size=size, tags=tags).info
        except BaseException:
            response["Body"].close()
            raise
        return ObjectStream(info, UpstreamBody(response["Body"], bucket, key), resolved)

    async def head_object(self, bucket: str, key: str) -> ObjectInfo:
        return (await self._up.head(bucket, key)).info

    async def delete_object(self, bucket: str, key: str) -> None:
        await self._up.require_bucket(bucket)
        loc = self._up.locate(bucket)
        client = await self._up.client()
        with upstream(bucket, key):
            await client.delete_object(Bucket=loc.bucket, Key=loc.key(key))

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        """A server-side copy of the object onto itself with the new metadata and tags."""
        return await self._copy(bucket, key, bucket, key, meta=meta, src_etag=None)

    def iter_objects(self, bucket: str, *, prefix: str = "",
                     start_after: str = "") -> AsyncIterator[ObjectInfo]:
        return listing.iter_objects(self._up, bucket, prefix=prefix, start_after=start_after)

    # -- copies --------------------------------------------------------------------------

    async def copy_object(self, src_bucket: str, src_key: str, dst_bucket: str,
                          dst_key: str, *, meta: ObjectMeta,
                          src_etag: str | None = None) -> ObjectInfo:
        return await self._copy(src_bucket, src_key, dst_bucket, dst_key, meta=meta,
                                src_etag=src_etag)

    async def _copy(self, src_bucket: str, src_key: str, dst_bucket: str, dst_key: str, *,
                    meta: ObjectMeta, src_etag: str | None) -> ObjectInfo:
        await self._up.require_bucket(dst_bucket)
        for attempt in range(_COPY_ATTEMPTS):
            source = await self._up.head(src_bucket, src_key, with_tags=False)
            if src_etag is not None and source.info.etag != src_etag.strip('"'):
                raise PreconditionFailed()
            # Squall's ETag of the copy is the source's: recorded, as upstream may differ.
            spec = CopySpec(src=self._up.locate(src_bucket), src_key=src_key,
                            src_etag=source.upstream_etag, size=source.info.size,
                            dst=self._up.locate(dst_bucket), dst_key=dst_key,
                            params=write_params(meta, etag=source.info.etag))
            try:
                _, modified = await server_copy(self._up, spec, err_bucket=dst_bucket,
                                                err_key=dst_key)
            except PreconditionFailed:
                if src_etag is not None:
                    raise
                if attempt + 1 == _COPY_ATTEMPTS:
                    raise ConditionalRequestConflict() from None
                continue  # the source changed between HEAD and copy: copy what it is now
            return ObjectInfo(bucket=dst_bucket, key=dst_key, size=source.info.size,
                              etag=source.info.etag, last_modified=modified, meta=meta)
        raise ConditionalRequestConflict()

    # -- multipart -----------------------------------------------------------------------

    async def create_multipart_upload(self, bucket: str, key: str, *,
                                      meta: ObjectMeta) -> UploadInfo:
        return await self._uploads.create(bucket, key, meta)

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, *, content_md5: bytes | None = None) -> PartInfo:
        return await self._uploads.upload_part(bucket, key, upload_id, part_number, body,
                                               content_md5)

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, part_number: int, *,
                               byte_range: RangeRequest | None = None,
                               src_etag: str | None = None) -> PartInfo:
        return await self._uploads.upload_part_copy(
            src_bucket, src_key, bucket, key, upload_id, part_number, byte_range=byte_range,
            src_etag=src_etag)

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        return await self._uploads.list_parts(bucket, key, upload_id)

    async def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                        parts: Sequence[CompletedPart], *,
                                        if_match: str | None = None,
                                        if_none_match: str | None = None) -> ObjectInfo:
        info, meta = await self._uploads.complete(bucket, key, upload_id, parts, if_match,
                                                  if_none_match)
        if meta is None:
            return info
        # The object's checksum lives in its upstream metadata (see backends.s3.meta).
        return await self.replace_metadata(bucket, key, meta)

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        await self._uploads.abort(bucket, key, upload_id)

    def iter_multipart_uploads(self, bucket: str, *,
                               prefix: str = "") -> AsyncIterator[UploadInfo]:
        return self._uploads.iterate(bucket, prefix=prefix)

    async def probe(self) -> str | None:
        """One ListBuckets: any answer (an error response included) means reachable.

        The reason returned is the typed error's message, which names no endpoint,
        bucket or credential (it is shown by the health check); the upstream's own
        error, with the URL, is logged once when the reason changes."""
        try:
            await self.list_buckets()
        except ServiceUnavailable as exc:
            if exc.message != self._probe_problem:
                log.warning("upstream probe failed: %s", exc.__cause__ or exc.message)
            self._probe_problem = exc.message
            return exc.message
        except StorageError:
            pass
        self._probe_problem = None
        return None

    async def aclose(self) -> None:
        await self._up.aclose()
