"""Multipart uploads staged in the hidden area, made objects without copies where they can.

``<hidden>/uploads/<bucket>/<upload id>/`` holds ``upload.json`` (key, meta, initiated)
and, per part, its record ``part-NNNNN.json`` (ETag, size, checksum, where its bytes are).
A part's bytes are written in place into the upload's assembly file, which completion
renames into place (see :mod:`backends.posix.assembly`), or into a data file of its own
``part-NNNNN.<random>``, which completion copies (copy_file_range). A part is replaced by
writing the new bytes, then atomically renaming the new record over the old one, then
unlinking the old data file. UploadPartCopy fills a part's data file with copy_file_range
from the source's file.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from backends.core.base import (
    CompletedPart,
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    PartInfo,
    RangeRequest,
    UploadInfo,
)
from backends.core.blocking import run_blocking
from backends.core.errors import (
    BadDigest,
    InvalidDigest,
    InvalidPart,
    NoSuchBucket,
    NoSuchKey,
    NoSuchUpload,
    PreconditionFailed,
)
from backends.core.keys import check_bucket
from backends.core.upload_checksums import part_checksum
from backends.files import (
    copy_data,
    fsync_dir,
    read_small,
    remove_tree,
    temp_name,
    write_atomic,
)
from backends.locks import NamedLocks
from backends.metajson import meta_from_json, meta_to_json
from backends.multipart import (
    MAX_PART_NUMBER,
    check_completion,
    completed_meta,
    multipart_etag,
)
from backends.oserrors import os_errors
from backends.posix import assembly, buckets
from backends.posix.assembly import ASSEMBLY, PlacedPart, StoredPart
from backends.posix.hidden import HiddenArea
from backends.posix.layout import encode_key
from backends.posix.objects import ObjectFiles
from backends.posix.staging import StagedFile, commit_shielded, settled

UPLOAD_MAGIC = "squall.upload"
PART_MAGIC = "squall.part"
VERSION = 1
_UPLOAD_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
_PART_RECORD = re.compile(r"part-(\d{5})\.json")
_PART_DATA = re.compile(r"part-\d{5}\.[0-9a-f]{20}")
_COPY_CHUNK = 1 << 20


def _dumps(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def _upload_from(data: Any, bucket: str, upload_id: str) -> UploadInfo | None:
    try:
        if (data.get("magic") != UPLOAD_MAGIC or data.get("v") != VERSION
                or data.get("bucket") != bucket or data.get("upload_id") != upload_id):
            return None
        return UploadInfo(bucket, str(data["key"]), upload_id, float(data["initiated"]),
                          meta_from_json(data.get("meta", {})))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def _part_from(data: Any) -> StoredPart | None:
    try:
        if data.get("magic") != PART_MAGIC or data.get("v") != VERSION:
            return None
        checksum = data.get("checksum")
        part = PartInfo(int(data["part_number"]), str(data["etag"]), int(data["size"]),
                        float(data["last_modified"]),
                        (str(checksum[0]), str(checksum[1])) if checksum else None)
        name, at = str(data["data"]), int(data.get("at", 0))
        if name == ASSEMBLY and at >= 0 or _PART_DATA.fullmatch(name) and not at:
            return StoredPart(part, name, at)
        return None
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        return None


def _record_name(part_number: int) -> str:
    return f"part-{part_number:05d}.json"


def _copy_range(src_fd: int, dst_fd: int, start: int, length: int, md5: bool) -> str | None:
    """Blocking: copy ``length`` bytes at ``start`` of ``src_fd`` to the start of
    ``dst_fd`` (copy_file_range, else pread/pwrite); with ``md5``, return their MD5."""
    copy_data(src_fd, dst_fd, length, src_offset=start, dst_offset=0, chunk_size=_COPY_CHUNK)
    if not md5:
        return None
    digest = hashlib.md5()
    for offset in range(start, start + length, _COPY_CHUNK):
        digest.update(os.pread(src_fd, min(_COPY_CHUNK, start + length - offset), offset))
    return digest.hexdigest()


class UploadStore:
    """Multipart uploads of the posix backend."""

    def __init__(self, hidden: HiddenArea, objects: ObjectFiles, *, durable: bool,
                 min_part_size: int, chunk_size: int) -> None:
        self._hidden = hidden
        self._objects = objects
        self._uploads = NamedLocks()  # per upload id: part commits, completion, abort
        self.bucket_locks = NamedLocks()  # per bucket: upload creation vs bucket deletion
        self._durable = durable
        self._min_part_size = min_part_size
        self._chunk_size = chunk_size

    # -- blocking helpers ------------------------------------------------------------

    def _dir(self, bucket: str, upload_id: str) -> Path:
        return self._hidden.uploads / bucket / upload_id

    def _load(self, bucket: str, key: str, upload_id: str) -> UploadInfo:
        """The upload, or NoSuchUpload (unknown id, or an id of another bucket or key)."""
        buckets.head(self._hidden, bucket)
        if not _UPLOAD_ID.fullmatch(upload_id):
            raise NoSuchUpload(upload_id)
        try:
            data = json.loads(read_small(self._dir(bucket, upload_id) / "upload.json"))
        except (FileNotFoundError, NotADirectoryError, ValueError) as exc:
            raise NoSuchUpload(upload_id) from exc
        upload = _upload_from(data, bucket, upload_id)
        if upload is None or upload.key != key:
            raise NoSuchUpload(upload_id)
        return upload

    def _parts(self, bucket: str, upload_id: str) -> dict[int, StoredPart]:
        found: dict[int, StoredPart] = {}
        directory = self._dir(bucket, upload_id)
        with os.scandir(directory) as entries:
            names = [e.name for e in entries if _PART_RECORD.fullmatch(e.name)]
        for name in names:
            try:
                parsed = _part_from(json.loads(read_small(directory / name)))
            except (FileNotFoundError, ValueError):
                continue
            if parsed is not None:
                found[parsed.info.part_number] = parsed
        return found

    def _create(self, bucket: str, key: str, meta: ObjectMeta) -> UploadInfo:
        buckets.head(self._hidden, bucket)
        upload = UploadInfo(bucket, key, secrets.token_urlsafe(18), time.time(), meta)
        staging = self._hidden.tmp / temp_name("upload")
        os.mkdir(staging)
        try:
            record = {"magic": UPLOAD_MAGIC, "v": VERSION, "bucket": bucket, "key": key,
                      "upload_id": upload.upload_id, "initiated": upload.initiated,
                      "meta": meta_to_json(meta)}
            write_atomic(staging / "upload.json", _dumps(record), tmp_dir=self._hidden.tmp,
                         durable=self._durable)
            parent = self._hidden.uploads / bucket
            if not parent.is_dir():
                parent.mkdir(exist_ok=True)
                if self._durable:
                    fsync_dir(self._hidden.uploads)
            os.rename(staging, parent / upload.upload_id)
        except BaseException:
            remove_tree(staging)
            raise
        if self._durable:
            fsync_dir(parent)
        return upload

    def _claim(self, bucket: str, upload_id: str, part_number: int, size: int) -> int | None:
        """Blocking: the offset a new part is written at in the assembly file, or None."""
        directory = self._dir(bucket, upload_id)
        if (directory / _record_name(part_number)).exists():
            return None  # a replaced part keeps its bytes until the new record is in place
        return assembly.claim(directory, part_number, size, self._min_part_size,
                              durable=self._durable)

    def _store_part(self, bucket: str, upload_id: str, staged: StagedFile,
                    part: PartInfo) -> None:
        directory = self._dir(bucket, upload_id)
        if not (directory / "upload.json").exists():
            raise NoSuchUpload(upload_id)
        record_name = _record_name(part.part_number)
        try:
            old = _part_from(json.loads(read_small(directory / record_name)))
        except (FileNotFoundError, ValueError):
            old = None
        if isinstance(staged, PlacedPart):
            data_name, at = ASSEMBLY, staged.offset
        else:
            data_name, at = f"part-{part.part_number:05d}.{secrets.token_hex(10)}", 0
            try:
                os.rename(staged.path, directory / data_name)
            except FileNotFoundError as exc:
                raise NoSuchUpload(upload_id) from exc
        staged.release()
        record = {"magic": PART_MAGIC, "v": VERSION, "part_number": part.part_number,
                  "etag": part.etag, "size": part.size, "last_modified": part.last_modified,
                  "checksum": list(part.checksum) if part.checksum else None,
                  "data": data_name, "at": at}
        write_atomic(directory / record_name, _dumps(record), tmp_dir=self._hidden.tmp,
                     durable=self._durable)
        if data_name == ASSEMBLY:
            assembly.release(directory, part.part_number)
        if old is not None and not old.placed and old.data != data_name:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / old.data)

    def _drop(self, bucket: str, upload_id: str) -> None:
        """Make the upload disappear at once (rename), then delete its files."""
        graveyard = self._hidden.tmp / temp_name("dropped")
        try:
            os.rename(self._dir(bucket, upload_id), graveyard)
        except FileNotFoundError:
            return
        if self._durable:
            fsync_dir(self._hidden.uploads / bucket)
        remove_tree(graveyard)

    def _list(self, bucket: str, prefix: str) -> list[UploadInfo]:
        buckets.head(self._hidden, bucket)
        found = []
        try:
            with os.scandir(self._hidden.uploads / bucket) as entries:
                ids = [e.name for e in entries if _UPLOAD_ID.fullmatch(e.name)]
        except FileNotFoundError:
            return []
        for upload_id in ids:
            try:
                data = json.loads(read_small(self._dir(bucket, upload_id) / "upload.json"))
            except (FileNotFoundError, NotADirectoryError, ValueError):
                continue
            upload = _upload_from(data, bucket, upload_id)
            if upload is not None and upload.key.startswith(prefix):
                found.append(upload)
        return sorted(found, key=lambda u: (u.key.encode(), u.initiated, u.upload_id))

    # -- operations ------------------------------------------------------------------

    async def create(self, bucket: str, key: str, meta: ObjectMeta) -> UploadInfo:
        check_bucket(bucket)
        encode_key(key)
        async with self.bucket_locks.hold(bucket):
            with os_errors("CreateMultipartUpload", missing=NoSuchBucket(bucket)):
                return await run_blocking(self._create, bucket, key, meta)

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, content_md5: bytes | None) -> PartInfo:
        check_bucket(bucket)
        if not 1 <= part_number <= MAX_PART_NUMBER:
            raise InvalidPart(f"Part number must be an integer between 1 and "
                              f"{MAX_PART_NUMBER}.")
        if content_md5 is not None and len(content_md5) != 16:
            raise InvalidDigest("Content-MD5 must be 16 bytes.")
        size = body.facts.declared_length
        with os_errors("UploadPart", missing=NoSuchUpload(upload_id)):
            upload = await run_blocking(self._load, bucket, key, upload_id)
            offset = None if size is None else await run_blocking(
                self._claim, bucket, upload_id, part_number, size)
        directory = self._dir(bucket, upload_id)
        staged = self._objects.staged() if offset is None or size is None else PlacedPart(
            directory / ASSEMBLY, offset, size, chunk_size=self._chunk_size,
            durable=self._durable, direct=self._objects.direct_io)
        stored = False
        try:
            with os_errors("UploadPart", missing=NoSuchUpload(upload_id)):  # (an abort)
                await staged.open()
                await staged.consume(body)
                st = await staged.finish()
            if content_md5 is not None and staged.md5 != content_md5:
                raise BadDigest()
            part = PartInfo(part_number, staged.md5.hex(), staged.size, st.st_mtime,
                            part_checksum(upload.meta, body))
            info = await commit_shielded(staged, self._commit_part(bucket, upload_id,
                                                                   staged, part))
            stored = True  # (its record's commit ended the placed write)
            return info
        finally:
            await staged.discard()  # waits for a write still running
            if offset is not None and not stored:
                await run_blocking(assembly.release, directory, part_number)

    async def _commit_part(self, bucket: str, upload_id: str, staged: StagedFile,
                           part: PartInfo) -> PartInfo:
        async with self._uploads.hold(upload_id):
            with os_errors("UploadPart", missing=NoSuchUpload(upload_id)):
                await run_blocking(self._store_part, bucket, upload_id, staged, part)
        return part

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, part_number: int, *,
                               byte_range: RangeRequest | None,
                               src_etag: str | None) -> PartInfo:
        """(A range of) the current source as a part; the file system copies the bytes
        (copy_file_range: a reflink or an in-kernel copy where it can). They are read back
        only for an MD5 the source's ETag does not give (a range, a multipart source)."""
        check_bucket(bucket)
        check_bucket(src_bucket)
        if not 1 <= part_number <= MAX_PART_NUMBER:
            raise InvalidPart(f"Part number must be an integer between 1 and "
                              f"{MAX_PART_NUMBER}.")
        with os_errors("UploadPartCopy", missing=NoSuchUpload(upload_id)):
            await run_blocking(self._load, bucket, key, upload_id)
        src_path = encode_key(src_key)
        staged = self._objects.staged()
        try:
            with os_errors("UploadPartCopy", missing=NoSuchKey(src_bucket, src_key)):
                # (the file is opened before its record is read: one version throughout)
                fd, info, _ = await self._objects._open(src_bucket, src_path)
            staged.adopt(fd)
            if src_etag is not None and src_etag.strip().strip('"') != info.etag:
                raise PreconditionFailed("The source object's ETag does not match.")
            resolved = byte_range.resolve(info.size) if byte_range is not None else None
            start, length = (resolved.start, resolved.length) if resolved else (0, info.size)
            same = length == info.size and "-" not in info.etag
            with os_errors("UploadPartCopy"):
                await staged.open()
                job = asyncio.ensure_future(run_blocking(
                    _copy_range, fd, staged.fd, start, length, not same))
                try:
                    md5 = await asyncio.shield(job)
                except asyncio.CancelledError:
                    await settled(job)  # the fds stay open until the copy has stopped
                    raise
                st = await staged.finish()
            part = PartInfo(part_number, md5 or info.etag, st.st_size, st.st_mtime)
            return await commit_shielded(staged, self._commit_part(bucket, upload_id,
                                                                   staged, part))
        finally:
            await staged.discard()

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        check_bucket(bucket)
        with os_errors("ListParts", missing=NoSuchUpload(upload_id)):
            await run_blocking(self._load, bucket, key, upload_id)
            parts = await run_blocking(self._parts, bucket, upload_id)
        return [parts[n].info for n in sorted(parts)]

    async def complete(self, bucket: str, key: str, upload_id: str,
                       requested: Sequence[CompletedPart], *, if_match: str | None,
                       if_none_match: str | None) -> ObjectInfo:
        check_bucket(bucket)
        path = encode_key(key)
        async with self._uploads.hold(upload_id):
            with os_errors("CompleteMultipartUpload", missing=NoSuchUpload(upload_id)):
                upload = await run_blocking(self._load, bucket, key, upload_id)
                stored = await run_blocking(self._parts, bucket, upload_id)
            chosen = check_completion(requested, [p.info for p in stored.values()],
                                      min_part_size=self._min_part_size)
            parts = [stored[p.part_number] for p in chosen]
            directory = self._dir(bucket, upload_id)
            staged = self._objects.staged()
            in_place = assembly.in_place(parts, stored.values())
            try:
                with os_errors("CompleteMultipartUpload", missing=NoSuchUpload(upload_id)):
                    st = await staged.made_by(functools.partial(
                        assembly.take, directory, parts, durable=self._durable,
                        direct=self._objects.direct_io)) if in_place else None
                    if st is None:
                        await staged.open()
                        st = await staged.fill_from_files(
                            [(directory / p.data, p.at, p.info.size) for p in parts])
                return await commit_shielded(staged, self._finish(
                    bucket, upload_id, path, staged, st, multipart_etag(chosen),
                    completed_meta(upload.meta, chosen, upload_id), if_match,
                    if_none_match))
            finally:
                await staged.discard()
                if in_place and not staged.committed:
                    await run_blocking(assembly.unseal, directory)

    async def _finish(self, bucket: str, upload_id: str, path: Any, staged: StagedFile,
                      st: os.stat_result, etag: str, meta: ObjectMeta, if_match: str | None,
                      if_none_match: str | None) -> ObjectInfo:
        info = await self._objects.commit(bucket, path, staged, st, etag, meta,
                                          if_match=if_match, if_none_match=if_none_match)
        with os_errors("CompleteMultipartUpload"):
            await run_blocking(self._drop, bucket, upload_id)
        return info

    async def abort(self, bucket: str, key: str, upload_id: str) -> None:
        check_bucket(bucket)
        async with self._uploads.hold(upload_id):
            with os_errors("AbortMultipartUpload", missing=NoSuchUpload(upload_id)):
                await run_blocking(self._load, bucket, key, upload_id)
                await run_blocking(self._drop, bucket, upload_id)

    async def iter(self, bucket: str, prefix: str) -> AsyncIterator[UploadInfo]:
        check_bucket(bucket)
        with os_errors("ListMultipartUploads", missing=NoSuchBucket(bucket)):
            uploads = await run_blocking(self._list, bucket, prefix)
        for upload in uploads:
            yield upload
