"""Shared plumbing of the S3 backend: the client, the bucket mapping and common lookups."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from backends.core.conditions import check_write_etag, etag_matches
from backends.core.errors import NoSuchBucket, NoSuchKey, PreconditionFailed
from backends.locks import NamedLocks
from backends.s3.client import ClientHolder
from backends.s3.config import S3Config
from backends.s3.errors import error_code, upstream
from backends.s3.meta import Described, describe, tags_from
from backends.s3.migration import adopt_legacy, sweep
from backends.s3.naming import Location, Naming


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


class Upstream:
    """What every part of the backend needs: a client, the mapping, HEAD and bucket checks."""

    def __init__(self, config: S3Config) -> None:
        self.config = config
        self.naming = Naming(config.bucket, config.prefix)
        self._clients = ClientHolder(config)
        # Writes of one key commit one at a time, so the write that returns last is the
        # one the upstream keeps (an upstream may apply concurrent writes in any order).
        self.commits = NamedLocks()
        # Shared mapping: old bucket markers are moved once per process, before first use.
        self._swept = not self.naming.shared
        self._sweep_lock: asyncio.Lock | None = None

    async def client(self) -> Any:
        client = await self._clients.get()
        if not self._swept:
            await self._sweep(client)
        return client

    async def _sweep(self, client: Any) -> None:
        """Move the first layout's bucket markers (see :mod:`backends.s3.migration`); a
        failure is raised to the caller and the sweep is tried again on the next use."""
        if self._sweep_lock is None:
            self._sweep_lock = asyncio.Lock()
        async with self._sweep_lock:
            if not self._swept:
                await sweep(client, self.naming)
                self._swept = True

    async def aclose(self) -> None:
        await self._clients.aclose()

    def locate(self, bucket: str) -> Location:
        return self.naming.locate(bucket)

    async def bucket_exists(self, bucket: str) -> bool:
        """Shared mode: does the marker exist? Direct mode: does the upstream bucket?"""
        if self.naming.shared:
            return await self.head_marker(bucket) is not None
        client = await self.client()
        try:
            with upstream(bucket):
                await client.head_bucket(Bucket=bucket)
        except (NoSuchKey, NoSuchBucket):
            return False
        return True

    async def head_marker(self, bucket: str) -> dict[str, Any] | None:
        """Shared mode: the HEAD response of ``bucket``'s marker, None if it has none; an
        old-layout marker written since the sweep is moved first."""
        client = await self.client()
        response = await self._head_marker(client, bucket)
        if response is None and await adopt_legacy(client, self.naming, bucket):
            response = await self._head_marker(client, bucket)
        return response

    async def _head_marker(self, client: Any, bucket: str) -> dict[str, Any] | None:
        marker = self.naming.marker(bucket)
        try:
            with upstream(bucket, marker):
                response: dict[str, Any] = await client.head_object(
                    Bucket=self.naming.shared_bucket, Key=marker)
        except (NoSuchKey, NoSuchBucket):
            return None
        return response

    async def require_bucket(self, bucket: str) -> None:
        """Shared mode only (upstream checks direct-mode buckets itself): NoSuchBucket."""
        if self.naming.shared and not await self.bucket_exists(bucket):
            raise NoSuchBucket(bucket)

    async def missing(self, bucket: str, key: str, exc: NoSuchKey | NoSuchBucket) -> Exception:
        """The right error for a 404 on ``key``: NoSuchBucket if its bucket is gone.

        A bare 404 (HEAD has no error body) or a shared-mode miss needs a bucket check.
        """
        if isinstance(exc, NoSuchKey) and (self.naming.shared or error_code(exc) != "NoSuchKey") \
                and not await self.bucket_exists(bucket):
            return NoSuchBucket(bucket)
        return exc

    async def head(self, bucket: str, key: str, *, with_tags: bool = True) -> Described:
        """HEAD the object (and its tags when it has any); NoSuchKey / NoSuchBucket."""
        loc = self.locate(bucket)
        client = await self.client()
        try:
            with upstream(bucket, key):
                response = await client.head_object(Bucket=loc.bucket, Key=loc.key(key))
                described = describe(response, bucket, key)
                if with_tags and described.tag_count:
                    tagging = await client.get_object_tagging(Bucket=loc.bucket,
                                                              Key=loc.key(key))
                    described = describe(response, bucket, key, tags=tags_from(tagging))
        except (NoSuchKey, NoSuchBucket) as exc:
            raise await self.missing(bucket, key, exc) from exc
        return described

    async def if_match_etag(self, bucket: str, key: str, if_match: str) -> str:
        """The upstream ETag to send as If-Match for a client's ``if_match`` (Squall ETags).

        Squall's ETag of an object may be kept in metadata (see :mod:`backends.s3.meta`),
        so it is compared here and the upstream ETag it stands for is forwarded: the write
        still fails upstream if the object changes in between.
        """
        described = await self.head(bucket, key, with_tags=False)
        if not etag_matches(if_match, described.info.etag):
            raise PreconditionFailed()
        return described.upstream_etag

    async def conditions(self, bucket: str, key: str, if_match: str | None,
                         if_none_match: str | None) -> dict[str, str]:
        """IfMatch / IfNoneMatch parameters for a conditional write.

        An If-None-Match naming ETags is decided here against the current object, whose
        upstream ETag is then sent as IfMatch (no object: IfNoneMatch ``*``), so the write
        still fails upstream if the object changes in between."""
        params: dict[str, str] = {}
        if if_match is not None:
            params["IfMatch"] = f'"{await self.if_match_etag(bucket, key, if_match)}"'
        if if_none_match is not None and if_none_match.strip() == "*":
            params["IfNoneMatch"] = "*"
        elif if_none_match is not None:
            try:
                described = await self.head(bucket, key, with_tags=False)
            except NoSuchKey:
                params["IfNoneMatch"] = "*"
            else:
                check_write_etag(bucket, key, described.info.etag, None, if_none_match)
                params.setdefault("IfMatch", f'"{described.upstream_etag}"')
        return params
