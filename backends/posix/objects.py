"""Objects of the posix backend: read, write (temp + rename), delete, copy, list."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from backends.core.base import (
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    RangeRequest,
    final_meta,
)
from backends.core.blocking import run_blocking
from backends.core.conditions import check_write_conditions
from backends.core.errors import (
    BackendError,
    BadDigest,
    InvalidDigest,
    NoSuchBucket,
    NoSuchKey,
    PreconditionFailed,
)
from backends.core.keys import check_bucket
from backends.locks import NamedLocks
from backends.oserrors import os_errors
from backends.posix import tree
from backends.posix.hidden import HiddenArea
from backends.posix.layout import KeyPath, encode_key
from backends.posix.listing import TreeLister
from backends.posix.metadata import MetaStore, Record
from backends.posix.reader import BytesBody, FileBody
from backends.posix.staging import StagedFile, commit_shielded, settled

T = TypeVar("T")
_COMMIT_ATTEMPTS = 64
_LIST_BATCH = 256
_FIRST_LIST_BATCH = 4


def _md5_of(fd: int, size: int, chunk_size: int) -> str:
    digest = hashlib.md5()
    offset = 0
    while offset < size:
        data = os.pread(fd, min(chunk_size, size - offset), offset)
        if not data:
            break
        digest.update(data)
        offset += len(data)
    return digest.hexdigest()


class ObjectFiles:
    """Objects in bucket trees; every public method is async and never blocks the loop."""

    def __init__(self, hidden: HiddenArea, metas: MetaStore, locks: NamedLocks, *,
                 durable: bool, chunk_size: int, direct_io: bool = False) -> None:
        self._hidden = hidden
        self._metas = metas
        self._locks = locks
        self._durable = durable
        self._chunk = chunk_size
        self.direct_io = direct_io

    # -- blocking helpers (worker threads) -------------------------------------------

    def _in_bucket(self, bucket: str, key: str, fn: Callable[..., T], *args: Any,
                   **kwargs: Any) -> T:
        """Blocking: ``fn(base_fd, *args, **kwargs)`` where base is the directory ``key``
        lives under (the bucket, or its internal area); NoSuchBucket if it is gone."""
        bucket_fd = self._hidden.open_base(bucket, key, durable=self._durable)
        try:
            return fn(bucket_fd, *args, **kwargs)
        finally:
            os.close(bucket_fd)

    def describe(self, bucket: str, key: str, fd: int, st: os.stat_result) -> ObjectInfo:
        """The ObjectInfo of an open object file; computes the MD5 of a foreign file."""
        record = self._metas.load(bucket, key, fd, st)
        if record is None:
            etag = _md5_of(fd, st.st_size, self._chunk)
            record = Record(etag, st.st_size, st.st_mtime_ns, ObjectMeta(), computed=True)
            self._metas.cache_computed(fd, record)
        return ObjectInfo(bucket, key, st.st_size, record.etag, st.st_mtime_ns / 1e9,
                          record.meta)

    def _open_described(self, bucket: str, path: KeyPath) -> tuple[int, ObjectInfo]:
        def run(bucket_fd: int) -> tuple[int, ObjectInfo]:
            opened = tree.open_object(bucket_fd, path)
            if opened is None:
                raise NoSuchKey(bucket, path.key)
            fd, st = opened
            try:
                return fd, self.describe(bucket, path.key, fd, st)
            except BaseException:
                os.close(fd)
                raise
        return self._in_bucket(bucket, path.key, run)

    def _open_or_read(self, bucket: str, path: KeyPath,
                      read_small: bool) -> tuple[int, ObjectInfo, bytes | None]:
        """Open and describe; with ``read_small`` an object of at most one chunk is read
        whole and closed in the same worker call (one thread hop for a small GET)."""
        fd, info = self._open_described(bucket, path)
        if not read_small or info.size > self._chunk:
            return fd, info, None
        try:
            data = os.pread(fd, info.size, 0)
        finally:
            os.close(fd)
        if len(data) != info.size:
            raise BackendError("The object's file changed size while it was read.")
        return -1, info, data

    def _current(self, bucket: str, path: KeyPath) -> ObjectInfo | None:
        try:
            fd, info = self._open_described(bucket, path)
        except NoSuchKey:
            return None
        os.close(fd)
        return info

    def _head(self, bucket: str, path: KeyPath) -> ObjectInfo:
        fd, info = self._open_described(bucket, path)
        os.close(fd)
        return info

    def _require_bucket(self, bucket: str) -> None:
        os.close(tree.open_bucket(self._hidden.root, bucket))

    async def _open(self, bucket: str, path: KeyPath, *, read_small: bool = False
                    ) -> tuple[int, ObjectInfo, bytes | None]:
        """Open and describe an object; the fd is closed if the caller is cancelled."""
        job = asyncio.ensure_future(run_blocking(self._open_or_read, bucket, path, read_small))
        try:
            return await asyncio.shield(job)
        except asyncio.CancelledError:
            job.add_done_callback(_close_opened)
            raise

    # -- reads -----------------------------------------------------------------------

    async def require_bucket(self, bucket: str) -> None:
        check_bucket(bucket)
        with os_errors("HeadBucket", missing=NoSuchBucket(bucket)):
            await run_blocking(self._require_bucket, bucket)

    async def head(self, bucket: str, key: str) -> ObjectInfo:
        check_bucket(bucket)
        path = encode_key(key)
        with os_errors("HeadObject", missing=NoSuchKey(bucket, key)):
            return await run_blocking(self._head, bucket, path)

    async def get(self, bucket: str, key: str,
                  byte_range: RangeRequest | None) -> ObjectStream:
        check_bucket(bucket)
        path = encode_key(key)
        with os_errors("GetObject", missing=NoSuchKey(bucket, key)):
            fd, info, data = await self._open(bucket, path, read_small=True)
        try:
            resolved = byte_range.resolve(info.size) if byte_range is not None else None
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        start, length = (resolved.start, resolved.length) if resolved else (0, info.size)
        if data is not None:
            return ObjectStream(info, BytesBody(data[start:start + length]), resolved)
        return ObjectStream(info, FileBody(fd, start, length, self._chunk), resolved)

    async def iter(self, bucket: str, prefix: str,
                   start_after: str) -> AsyncIterator[ObjectInfo]:
        check_bucket(bucket)
        with os_errors("ListObjects", missing=NoSuchBucket(bucket)):
            bucket_fd = await run_blocking(self._hidden.open_base, bucket, prefix,
                                           durable=self._durable)
        lister = TreeLister(bucket_fd, prefix=prefix, start_after=start_after,
                            describe=lambda key, fd, st: self.describe(bucket, key, fd, st))
        job: asyncio.Future[list[ObjectInfo]] | None = None
        # Small first batches: a listing restarted past a common prefix often needs one key.
        size = _FIRST_LIST_BATCH
        try:
            while True:
                job = asyncio.ensure_future(run_blocking(lister.next_batch, size))
                size = min(size * 4, _LIST_BATCH)
                with os_errors("ListObjects", missing=NoSuchBucket(bucket)):
                    batch = await asyncio.shield(job)
                if not batch:
                    return
                for info in batch:
                    yield info
        finally:
            await settled(job)
            lister.close()
            os.close(bucket_fd)

    # -- writes ----------------------------------------------------------------------

    async def put(self, bucket: str, key: str, body: DescribedBody, *, meta: ObjectMeta,
                  content_md5: bytes | None, if_match: str | None,
                  if_none_match: str | None) -> ObjectInfo:
        if content_md5 is not None and len(content_md5) != 16:
            raise InvalidDigest("Content-MD5 must be 16 bytes.")
        path = encode_key(key)
        await self.require_bucket(bucket)  # before any of the body is read
        staged = self.staged()
        staged.open_later()  # made in the job that writes the first bytes
        try:
            with os_errors("PutObject"):
                await staged.consume(body)
                st = await staged.finish()
            if content_md5 is not None and staged.md5 != content_md5:
                raise BadDigest()
            meta = final_meta(meta, body)
            return await commit_shielded(staged, self.commit(
                bucket, path, staged, st, staged.md5.hex(), meta,
                if_match=if_match, if_none_match=if_none_match))
        finally:
            await staged.discard()

    def staged(self) -> StagedFile:
        return StagedFile(self._hidden.tmp, chunk_size=self._chunk, durable=self._durable,
                          direct=self.direct_io)

    async def commit(self, bucket: str, path: KeyPath, staged: StagedFile,
                     st: os.stat_result, etag: str, meta: ObjectMeta, *,
                     if_match: str | None = None,
                     if_none_match: str | None = None) -> ObjectInfo:
        """Rename a finished staged file into place as ``path``'s object.

        Conditions are checked under the key's lock, atomically with the rename. Directory
        conflicts (an object file where a directory is needed) are resolved by displacing
        that object under its own lock: locks are always taken child key first, then
        ancestor keys, so they cannot deadlock.
        """
        record = Record(etag, st.st_size, st.st_mtime_ns, meta)
        async with self._locks.hold((bucket, path.key)):
            with os_errors("PutObject", missing=NoSuchBucket(bucket)):
                if if_match is not None or if_none_match is not None:
                    current = await run_blocking(self._current, bucket, path)
                    check_write_conditions(bucket, path.key, current, if_match, if_none_match)
                for _ in range(_COMMIT_ATTEMPTS):
                    outcome = await run_blocking(self._place, bucket, path, staged, record)
                    if isinstance(outcome, tree.Conflict):
                        async with self._locks.hold((bucket, outcome.owner)):
                            await run_blocking(self._in_bucket, bucket, path.key, self._displace,
                                               path, outcome.index)
                    elif outcome is not None:
                        return ObjectInfo(bucket, path.key, st.st_size, etag,
                                          st.st_mtime_ns / 1e9, meta)
        raise BackendError(f"Could not store {path.key!r}: its directories keep changing.")

    def _place(self, bucket: str, path: KeyPath, staged: StagedFile,
               record: Record) -> tree.Conflict | str | None:
        """Blocking: the name the object got, a Conflict, or None to retry."""
        def attach(target: str, current_ino: int | None) -> None:
            self._metas.store(bucket, path.key, staged.fd, record, current_ino=current_ino)

        def run(bucket_fd: int) -> tree.Conflict | str | None:
            try:
                parent = tree.ensure_dirs(bucket_fd, path, durable=self._durable)
            except tree.ParentGone:
                return None
            if isinstance(parent, tree.Conflict):
                return parent
            try:
                name = tree.place(parent, path, staged.path, attach, durable=self._durable)
                staged.release()
                return name
            except tree.ParentGone:
                return None
            finally:
                os.close(parent)
        return self._in_bucket(bucket, path.key, run)

    def _displace(self, bucket_fd: int, path: KeyPath, index: int) -> None:
        tree.displace(bucket_fd, path, index, durable=self._durable)

    async def delete(self, bucket: str, key: str) -> None:
        check_bucket(bucket)
        path = encode_key(key)
        with os_errors("DeleteObject", missing=NoSuchBucket(bucket)):
            async with self._locks.hold((bucket, key)):
                removed = await run_blocking(self._remove, bucket, path)
            if removed:
                await self._prune(bucket, path)

    def _remove(self, bucket: str, path: KeyPath) -> bool:
        removed = self._in_bucket(bucket, path.key, tree.remove, path, durable=self._durable)
        if removed:
            self._metas.forget(bucket, path.key)
        return removed

    async def _prune(self, bucket: str, path: KeyPath) -> None:
        """Remove directories the delete left empty, restoring displaced objects' names."""
        for depth in range(len(path.dirs), 0, -1):
            removed, displaced = await run_blocking(
                self._in_bucket, bucket, path.key, tree.prune, path, depth, durable=self._durable)
            if not removed:
                return
            owner = path.owners[depth - 1]
            if displaced and owner is not None:
                owner_path = encode_key(owner)
                async with self._locks.hold((bucket, owner)):
                    await run_blocking(self._in_bucket, bucket, owner, tree.restore, owner_path,
                                       durable=self._durable)

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        check_bucket(bucket)
        path = encode_key(key)
        async with self._locks.hold((bucket, key)):
            with os_errors("ReplaceMetadata", missing=NoSuchKey(bucket, key)):
                return await run_blocking(self._rewrite_meta, bucket, path, meta)

    def _rewrite_meta(self, bucket: str, path: KeyPath, meta: ObjectMeta) -> ObjectInfo:
        fd, info = self._open_described(bucket, path)
        try:
            st = os.fstat(fd)
            record = Record(info.etag, st.st_size, st.st_mtime_ns, meta)
            self._metas.store(bucket, path.key, fd, record, current_ino=st.st_ino)
        finally:
            os.close(fd)
        return ObjectInfo(bucket, path.key, info.size, info.etag, info.last_modified, meta)

    async def copy(self, src_bucket: str, src_key: str, dst_bucket: str, dst_key: str, *,
                   meta: ObjectMeta, src_etag: str | None) -> ObjectInfo:
        check_bucket(src_bucket)
        src_path, dst_path = encode_key(src_key), encode_key(dst_key)
        await self.require_bucket(dst_bucket)
        staged = self.staged()
        try:
            with os_errors("CopyObject", missing=NoSuchKey(src_bucket, src_key)):
                fd, info, _ = await self._open(src_bucket, src_path)
            staged.adopt(fd)
            if src_etag is not None and src_etag.strip().strip('"') != info.etag:
                raise PreconditionFailed("The source object's ETag does not match.")
            with os_errors("CopyObject"):
                await staged.open()
                st = await staged.fill_from_fd(fd, info.size)
            # The data is the source's, so is its ETag (an MD5, or a multipart ETag).
            return await commit_shielded(staged, self.commit(
                dst_bucket, dst_path, staged, st, info.etag, meta))
        finally:
            await staged.discard()


def _close_opened(job: asyncio.Future[tuple[int, ObjectInfo, bytes | None]]) -> None:
    if not job.cancelled() and job.exception() is None and job.result()[0] >= 0:
        os.close(job.result()[0])
