"""Multipart uploads passed through to the upstream multipart API (ids are upstream ids).

UploadPart needs its length up front and a part body arrives as a stream of unknown
length, so each part is spooled first: in memory up to ``part_size`` bytes, beyond that to
a temporary file under the data directory. Requests are checked here as S3 checks them
(upload of this very key, Content-MD5, completion rules) before being forwarded, as some
S3 implementations are lax; each part upload, listing and abort costs one small
ListMultipartUploads more.

Part checksums (the S3 layer's verified ``(algorithm, value)``) are kept in memory for the
upload's lifetime: upstreams differ in the checksums they accept on parts, and S3 has no
per-part metadata. After a restart, parts list without checksums (see docs/s3-backend.md).
The upload's metadata, with the checksum algorithm and type it declared
(:mod:`backends.core.upload_checksums`), is kept the same way: the object's checksum is written
into its upstream metadata after completion (a server-side copy onto itself), and after a
restart an upload completes without one.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from backends.core.base import (
    CompletedPart,
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    PartInfo,
    RangeRequest,
    UploadInfo,
)
from backends.core.errors import (
    BadDigest,
    NoSuchBucket,
    NoSuchUpload,
    PreconditionFailed,
    StorageError,
)
from backends.core.upload_checksums import part_checksum, undeclared, upload_checksum
from backends.multipart import check_completion, completed_meta
from backends.s3.errors import upstream
from backends.s3.meta import write_params
from backends.s3.spool import Spool
from backends.s3.upstream import Upstream, b64


def _ts(value: datetime | None) -> float:
    return value.timestamp() if value else 0.0


class Uploads:
    """The MultipartBackend operations over upstream multipart uploads."""

    def __init__(self, up: Upstream, spool_dir: Path | None) -> None:
        self._up = up
        self._spool_dir = spool_dir
        self._checksums: dict[str, dict[int, tuple[str, str]]] = {}
        self._metas: dict[str, ObjectMeta] = {}  # per upload id, as created

    def _target(self, bucket: str, key: str) -> dict[str, str]:
        loc = self._up.locate(bucket)
        return {"Bucket": loc.bucket, "Key": loc.key(key)}

    async def create(self, bucket: str, key: str, meta: ObjectMeta) -> UploadInfo:
        await self._up.require_bucket(bucket)
        client = await self._up.client()
        with upstream(bucket, key):
            # The object's checksum is its parts' composite one, not the one given here.
            response = await client.create_multipart_upload(
                **self._target(bucket, key),
                **write_params(replace(undeclared(meta), checksum=None)))
        upload_id = str(response["UploadId"])
        self._metas[upload_id] = meta
        initiated = 0.0
        async for upload in self.iterate(bucket, prefix=key):  # S3 returns no timestamp
            if upload.upload_id == upload_id:
                initiated = upload.initiated
                break
        return UploadInfo(bucket, key, upload_id, initiated, meta)

    async def _check_upload(self, bucket: str, key: str, upload_id: str) -> None:
        """NoSuchUpload unless ``upload_id`` is an upload of exactly this bucket and key.

        Asked through ListMultipartUploads: some S3 implementations accept any key with a
        known upload id in UploadPart, ListParts and AbortMultipartUpload.
        """
        if not upload_id:
            raise NoSuchUpload(upload_id)
        target = self._target(bucket, key)
        client = await self._up.client()
        paginator = client.get_paginator("list_multipart_uploads")
        try:
            with upstream(bucket, key, upload_id):
                async for page in paginator.paginate(Bucket=target["Bucket"],
                                                     Prefix=target["Key"]):
                    for u in page.get("Uploads", []):
                        if u["Key"] == target["Key"] and u["UploadId"] == upload_id:
                            return
        except NoSuchBucket:
            raise NoSuchUpload(upload_id) from None
        raise NoSuchUpload(upload_id)

    async def _stored_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        """The upload's parts in part-number order; NoSuchUpload."""
        await self._check_upload(bucket, key, upload_id)
        client = await self._up.client()
        known = self._checksums.get(upload_id, {})
        parts: list[PartInfo] = []
        paginator = client.get_paginator("list_parts")
        with upstream(bucket, key, upload_id):
            async for page in paginator.paginate(**self._target(bucket, key),
                                                 UploadId=upload_id):
                for p in page.get("Parts", []):
                    number = int(p["PartNumber"])
                    parts.append(PartInfo(number, str(p["ETag"]).strip('"'), int(p["Size"]),
                                          _ts(p.get("LastModified")), known.get(number)))
        return sorted(parts, key=lambda p: p.part_number)

    async def upload_part(self, bucket: str, key: str, upload_id: str, number: int,
                          body: DescribedBody, content_md5: bytes | None) -> PartInfo:
        """Spool the part (checking Content-MD5 here too: not every upstream does), then
        send it with its length."""
        await self._check_upload(bucket, key, upload_id)
        spool = Spool(self._up.config.part_size, self._spool_dir)
        try:
            await spool.fill(body)
            md5 = spool.md5.digest()
            if content_md5 is not None and content_md5 != md5:
                raise BadDigest()
            checksum = part_checksum(self._metas.get(upload_id, ObjectMeta()), body)
            client = await self._up.client()
            data = spool.memory() if spool.in_memory else await spool.file()
            with upstream(bucket, key, upload_id):
                response = await client.upload_part(
                    **self._target(bucket, key), UploadId=upload_id, PartNumber=number,
                    Body=data, ContentLength=spool.size, ContentMD5=b64(md5))
        finally:
            await spool.aclose()
        known = self._checksums.setdefault(upload_id, {})
        if checksum is not None:
            known[number] = checksum
        else:
            known.pop(number, None)
        return PartInfo(number, str(response["ETag"]).strip('"'), spool.size,
                        time.time(), checksum)

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, number: int, *, byte_range: RangeRequest | None,
                               src_etag: str | None) -> PartInfo:
        """UploadPartCopy upstream: the bytes never pass through Squall. The range is
        resolved here (as a GET resolves it; S3 copies take no suffix ranges) and the copy
        is tied to the upstream ETag of the source version checked."""
        await self._check_upload(bucket, key, upload_id)
        source = await self._up.head(src_bucket, src_key, with_tags=False)
        if src_etag is not None and source.info.etag != src_etag.strip().strip('"'):
            raise PreconditionFailed()
        resolved = byte_range.resolve(source.info.size) if byte_range is not None else None
        loc = self._up.locate(src_bucket)
        params = {"CopySource": {"Bucket": loc.bucket, "Key": loc.key(src_key)},
                  "CopySourceIfMatch": f'"{source.upstream_etag}"'}
        if resolved is not None:
            params["CopySourceRange"] = f"bytes={resolved.start}-{resolved.end}"
        client = await self._up.client()
        with upstream(bucket, key, upload_id):
            response = await client.upload_part_copy(
                **self._target(bucket, key), UploadId=upload_id, PartNumber=number, **params)
        result = response["CopyPartResult"]
        self._checksums.get(upload_id, {}).pop(number, None)
        return PartInfo(number, str(result["ETag"]).strip('"'),
                        resolved.length if resolved else source.info.size,
                        _ts(result.get("LastModified")) or time.time())

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        return await self._stored_parts(bucket, key, upload_id)

    async def complete(self, bucket: str, key: str, upload_id: str,
                       parts: Sequence[CompletedPart], if_match: str | None,
                       if_none_match: str | None) -> tuple[ObjectInfo, ObjectMeta | None]:
        """Validated here as S3 does (:func:`check_completion`, with Squall's minimum part
        size) so every upstream reports the same errors, then completed upstream.

        Also returns the metadata to write onto the object when it must carry a checksum
        (the upload declared one, or was created with one), else None.
        """
        try:
            stored = await self._stored_parts(bucket, key, upload_id)
        except NoSuchUpload as gone:
            # Perhaps a retry of a completed upload: the upstream knows (S3 does); any
            # other answer of its leaves the upload unknown.
            try:
                return await self._send_complete(bucket, key, upload_id, parts, {}), None
            except StorageError:
                raise gone from None
        chosen = check_completion(parts, stored, min_part_size=self._up.config.min_part_size)
        created = self._metas.get(upload_id)
        wanted = None
        if created is not None and (upload_checksum(created) is not None
                                    or created.checksum is not None):
            wanted = completed_meta(created, chosen, upload_id)
        conditions = await self._up.conditions(bucket, key, if_match, if_none_match)
        info = await self._send_complete(bucket, key, upload_id, parts, conditions)
        self._checksums.pop(upload_id, None)
        self._metas.pop(upload_id, None)
        if wanted is None or wanted.checksum is None:
            return info, None
        return info, replace(info.meta, checksum=wanted.checksum)

    async def _send_complete(self, bucket: str, key: str, upload_id: str,
                             parts: Sequence[CompletedPart],
                             conditions: dict[str, str]) -> ObjectInfo:
        """CompleteMultipartUpload upstream; the object it made."""
        client = await self._up.client()
        with upstream(bucket, key, upload_id):
            done = await client.complete_multipart_upload(
                **self._target(bucket, key), UploadId=upload_id, **conditions,
                MultipartUpload={"Parts": [{"PartNumber": p.part_number,
                                            "ETag": f'"{p.etag.strip(chr(34))}"'}
                                           for p in parts]})
        etag = str(done["ETag"]).strip('"')
        info = (await self._up.head(bucket, key)).info
        return info if info.etag == etag else replace(info, etag=etag)

    async def abort(self, bucket: str, key: str, upload_id: str) -> None:
        await self._check_upload(bucket, key, upload_id)
        client = await self._up.client()
        with upstream(bucket, key, upload_id):
            await client.abort_multipart_upload(**self._target(bucket, key),
                                                UploadId=upload_id)
        self._checksums.pop(upload_id, None)
        self._metas.pop(upload_id, None)

    async def iterate(self, bucket: str, *, prefix: str = "") -> AsyncIterator[UploadInfo]:
        """Uploads sorted by (key, initiated, upload id); NoSuchBucket on first step."""
        await self._up.require_bucket(bucket)
        loc = self._up.locate(bucket)
        client = await self._up.client()
        found: list[UploadInfo] = []
        paginator = client.get_paginator("list_multipart_uploads")
        try:
            with upstream(bucket):
                async for page in paginator.paginate(Bucket=loc.bucket,
                                                     Prefix=loc.list_position(prefix, prefix)):
                    for u in page.get("Uploads", []):
                        upload_id = str(u["UploadId"])
                        found.append(UploadInfo(bucket, loc.squall_key(u["Key"]), upload_id,
                                                _ts(u.get("Initiated")),
                                                self._metas.get(upload_id, ObjectMeta())))
        except NoSuchBucket:
            raise NoSuchBucket(bucket) from None
        found.sort(key=lambda u: (u.key.encode(), u.initiated, u.upload_id))
        for upload in found:
            yield upload
