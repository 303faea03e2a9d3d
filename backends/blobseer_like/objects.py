"""Object operations: every write makes a new immutable version; copies share chunks."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from backends.blobseer_like import format as fmt
from backends.blobseer_like.chunks import ChunkStream, ChunkWriter, pieces
from backends.blobseer_like.pins import Pin
from backends.blobseer_like.store import BlobStore
from backends.core.base import (
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    RangeRequest,
    final_meta,
)
from backends.core.blocking import run_blocking
from backends.core.errors import (
    BadDigest,
    InvalidDigest,
    InvalidKey,
    KeyTooLong,
    NoSuchBucket,
    NoSuchKey,
    PreconditionFailed,
)
from backends.core.keys import check_bucket, check_key

INTERNAL_PREFIX = "\x7f"  # keys of the versioning layer (noncurrent versions, markers)
MAX_INTERNAL_KEY_BYTES = 4096


def check_object_key(key: str) -> None:
    """S3's key rules; internal keys (``\\x7f...``) may be up to 4 KiB. No NUL anywhere."""
    if key.startswith(INTERNAL_PREFIX):
        try:
            size = len(key.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidKey("The key is not valid UTF-8.") from exc
        if size > MAX_INTERNAL_KEY_BYTES:
            raise KeyTooLong(f"The internal key is {size} bytes long; the limit is "
                             f"{MAX_INTERNAL_KEY_BYTES}.")
    else:
        check_key(key)
    if "\0" in key:
        raise InvalidKey("The key must not contain NUL.")


def chunk_ids(version: fmt.Version | None) -> list[str]:
    return [c.id for c in version.chunks] if version is not None else []


class Objects:
    """Object reads and writes of one store."""

    def __init__(self, store: BlobStore) -> None:
        self._store = store

    def current(self, bucket: str, key: str) -> fmt.Version | None:
        """Blocking: the current version, None if the key has none; NoSuchBucket."""
        index = self._store.index
        if index.bucket(bucket) is None:
            raise NoSuchBucket(bucket)
        return index.current(bucket, key)

    def existing(self, bucket: str, key: str) -> fmt.Version:
        """Blocking: the current version; NoSuchBucket, NoSuchKey."""
        version = self.current(bucket, key)
        if version is None:
            raise NoSuchKey(bucket, key)
        return version

    async def pinned(self, bucket: str, key: str) -> tuple[fmt.Version, Pin]:
        """The current version with its chunks pinned (the caller unpins)."""
        check_bucket(bucket)
        check_object_key(key)
        return await self._store.read_pinned(lambda: self.existing(bucket, key), chunk_ids)

    def writer(self, *, md5: bool = True) -> ChunkWriter:
        store = self._store
        return ChunkWriter(store.pool, store.pins, store.config.chunk_size, md5=md5)

    def stream(self, version: fmt.Version, pin: Pin, start: int, length: int) -> ChunkStream:
        store = self._store
        return ChunkStream(store.pool, store.pins, pin,
                           pieces(version.chunks, start, length), store.pool.fanout())

    # -- reads -------------------------------------------------------------------------

    async def head(self, bucket: str, key: str) -> ObjectInfo:
        check_bucket(bucket)
        check_object_key(key)
        return (await run_blocking(self.existing, bucket, key)).info()

    async def get(self, bucket: str, key: str, byte_range: RangeRequest | None) -> ObjectStream:
        version, pin = await self.pinned(bucket, key)
        try:
            resolved = byte_range.resolve(version.size) if byte_range is not None else None
        except BaseException:
            self._store.pins.unpin(pin)
            raise
        start, length = (resolved.start, resolved.length) if resolved else (0, version.size)
        body = self.stream(version, pin, start, length)
        try:
            await body.prefetch()
        except BaseException:
            await body.aclose()  # releases the pin, also when cancelled
            raise
        return ObjectStream(version.info(), body, resolved)

    async def iter(self, bucket: str, prefix: str, start_after: str
                   ) -> AsyncIterator[ObjectInfo]:
        check_bucket(bucket)
        await self._store.require_bucket(bucket)
        after = start_after
        while True:
            batch = await run_blocking(self._store.index.versions, bucket, prefix, after)
            if not batch:
                return
            for version in batch:
                yield version.info()
            after = batch[-1].key

    # -- writes ------------------------------------------------------------------------

    async def put(self, bucket: str, key: str, body: DescribedBody, *, meta: ObjectMeta,
                  content_md5: bytes | None, if_match: str | None,
                  if_none_match: str | None) -> ObjectInfo:
        check_bucket(bucket)
        check_object_key(key)
        if content_md5 is not None and len(content_md5) != 16:
            raise InvalidDigest("Content-MD5 must be 16 bytes.")
        await self._store.require_bucket(bucket)
        writer = self.writer()
        try:
            await writer.consume(body)
            chunks = await writer.finish()
            if content_md5 is not None and writer.md5 != content_md5:
                raise BadDigest()
            meta = final_meta(meta, body)
            etag, size = writer.md5.hex(), writer.size

            def build(current: fmt.Version | None, seq: int, name: str,
                      replicas: tuple[str, ...]) -> fmt.Version:
                return fmt.Version(name, seq, bucket, key, size, etag, time.time_ns(), meta,
                                   chunks, replicas)

            version = await self._store.commit(bucket, key, build, if_match=if_match,
                                               if_none_match=if_none_match)
        except BaseException:
            await writer.discard()
            raise
        writer.release()
        assert version is not None
        return version.info()

    async def delete(self, bucket: str, key: str) -> None:
        check_bucket(bucket)
        check_object_key(key)

        def build(current: fmt.Version | None, seq: int, name: str,
                  replicas: tuple[str, ...]) -> fmt.Tombstone | None:
            if current is None:
                return None  # nothing to hide: deleting a missing key succeeds
            return fmt.Tombstone(name, seq, bucket, key, time.time_ns(), replicas)

        await self._store.commit(bucket, key, build)

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        check_bucket(bucket)
        check_object_key(key)

        def build(current: fmt.Version | None, seq: int, name: str,
                  replicas: tuple[str, ...]) -> fmt.Version:
            if current is None:
                raise NoSuchKey(bucket, key)
            return fmt.Version(name, seq, bucket, key, current.size, current.etag,
                               current.mtime_ns, meta, current.chunks, replicas)

        version = await self._store.commit(bucket, key, build)
        assert version is not None
        return version.info()

    async def copy(self, src_bucket: str, src_key: str, dst_bucket: str, dst_key: str, *,
                   meta: ObjectMeta, src_etag: str | None) -> ObjectInfo:
        """A new version of the destination that shares every chunk of the source."""
        check_bucket(dst_bucket)
        check_object_key(dst_key)
        source, pin = await self.pinned(src_bucket, src_key)
        try:
            if src_etag is not None and src_etag.strip().strip('"') != source.etag:
                raise PreconditionFailed("The source object's ETag does not match.")

            def build(current: fmt.Version | None, seq: int, name: str,
                      replicas: tuple[str, ...]) -> fmt.Version:
                return fmt.Version(name, seq, dst_bucket, dst_key, source.size, source.etag,
                                   time.time_ns(), meta, source.chunks, replicas)

            version = await self._store.commit(dst_bucket, dst_key, build)
        finally:
            self._store.pins.unpin(pin)
        assert version is not None
        return version.info()
