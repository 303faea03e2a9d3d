"""Multipart uploads: parts are chunk maps; completion and part copies move no data.

An upload and its parts are records in ``uploads/<id>/`` on the upload's replica
providers (so a rebuild finds uploads in progress). Completion commits a version whose
chunk map is the parts' maps joined, and forgets the upload in the same index batch.
"""

from __future__ import annotations

import hashlib
import re
import time

from backends.blobseer_like import format as fmt
from backends.blobseer_like.chunks import pieces
from backends.blobseer_like.index import Batch
from backends.blobseer_like.objects import Objects, check_object_key
from backends.blobseer_like.provider import Provider
from backends.blobseer_like.store import BlobStore
from backends.core.base import (
    ByteRange,
    CompletedPart,
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    PartInfo,
    RangeRequest,
    UploadInfo,
)
from backends.core.blocking import run_blocking
from backends.core.errors import BadDigest, InvalidDigest, NoSuchUpload, PreconditionFailed
from backends.core.keys import check_bucket
from backends.core.upload_checksums import part_checksum
from backends.multipart import check_completion, completed_meta, multipart_etag
from backends.oserrors import os_errors

_UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")


def part_record_name(part_number: int, seq: int) -> str:
    return f"part-{part_number:05d}-{seq:020d}"


class Uploads:
    """Multipart uploads of one store."""

    def __init__(self, store: BlobStore, objects: Objects) -> None:
        self._store = store
        self._objects = objects

    def _get(self, bucket: str, key: str, upload_id: str) -> fmt.Upload:
        """Blocking: the upload, if it is one of ``bucket``/``key``; NoSuchUpload."""
        upload = self._store.index.upload(upload_id) if _UPLOAD_ID.match(upload_id) else None
        if upload is None or (upload.bucket, upload.key) != (bucket, key):
            raise NoSuchUpload(upload_id)
        return upload

    async def create(self, bucket: str, key: str, meta: ObjectMeta) -> UploadInfo:
        check_bucket(bucket)
        check_object_key(key)
        store = self._store
        async with store.gate.shared(bucket):
            await store.require_bucket(bucket)
            upload_id = fmt.new_id()
            replicas = tuple(p.id for p in store.pool.replicas(upload_id))
            upload = fmt.Upload(upload_id, bucket, key, time.time_ns(), meta, replicas)
            blob = fmt.encode_record(upload)

            def write(provider: Provider) -> None:
                provider.make_upload_dir(upload_id)
                provider.write_file(provider.upload_dir(upload_id) / fmt.UPLOAD_RECORD, blob)

            pin = store.pins.pin([upload_id])
            try:
                await store.on_replicas(replicas, write, "CreateMultipartUpload")
                await run_blocking(store.index.write, Batch().put_upload(upload))
            finally:
                store.pins.unpin(pin)
        return upload.info()

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, content_md5: bytes | None) -> PartInfo:
        if content_md5 is not None and len(content_md5) != 16:
            raise InvalidDigest("Content-MD5 must be 16 bytes.")
        upload = await run_blocking(self._get, bucket, key, upload_id)
        writer = self._objects.writer()
        try:
            await writer.consume(body)
            chunks = await writer.finish()
            if content_md5 is not None and writer.md5 != content_md5:
                raise BadDigest()
            part = await self._commit_part(
                bucket, key, upload_id, part_number, chunks, writer.md5.hex(),
                part_checksum(upload.meta, body))
        except BaseException:
            await writer.discard()
            raise
        writer.release()
        return part.info()

    async def _commit_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                           chunks: tuple[fmt.ChunkRef, ...], etag: str,
                           checksum: tuple[str, str] | None) -> fmt.Part:
        store = self._store
        return await store.shielded(self._commit_part_now(
            bucket, key, upload_id, part_number, chunks, etag, checksum))

    async def _commit_part_now(self, bucket: str, key: str, upload_id: str, part_number: int,
                               chunks: tuple[fmt.ChunkRef, ...], etag: str,
                               checksum: tuple[str, str] | None) -> fmt.Part:
        store = self._store
        async with store.upload_locks.hold(upload_id):
            upload = await run_blocking(self._get, bucket, key, upload_id)
            seq = store.next_seq()
            part = fmt.Part(upload_id, part_number, part_record_name(part_number, seq), seq,
                            sum(c.size for c in chunks), etag, time.time_ns(), checksum,
                            chunks)
            blob = fmt.encode_record(part)
            pin = store.pins.pin([part.record])
            try:
                await store.on_replicas(
                    upload.replicas,
                    lambda p: p.write_file(p.upload_dir(upload_id) / part.record, blob),
                    "UploadPart")
                old = await run_blocking(store.index.part, upload_id, part_number)
                await run_blocking(store.index.write, Batch().put_part(part).set_seq(seq))
            finally:
                store.pins.unpin(pin)
        if old is not None:
            store.garbage.set()  # the replaced part's record and chunks
        return part

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, part_number: int, *,
                               byte_range: RangeRequest | None,
                               src_etag: str | None) -> PartInfo:
        """A part sharing the source's chunks; only chunks the range cuts are rewritten."""
        await run_blocking(self._get, bucket, key, upload_id)
        source, pin = await self._objects.pinned(src_bucket, src_key)
        writer = self._objects.writer(md5=False)
        try:
            if src_etag is not None and src_etag.strip().strip('"') != source.etag:
                raise PreconditionFailed("The source object's ETag does not match.")
            whole = ByteRange(0, source.size - 1) if source.size else None
            resolved = byte_range.resolve(source.size) if byte_range is not None else whole
            slices = pieces(source.chunks, resolved.start, resolved.length) if resolved else []
            shared: list[fmt.ChunkRef] = []
            head = 0
            for ref, lo, hi in slices:
                if (lo, hi) == (0, ref.size):
                    shared.append(ref)
                    continue
                data = await self._store.pool.get(ref.provider).read(ref.id, ref.size, ref.crc)
                await writer.feed(data[lo:hi])
                if not shared:
                    await writer.cut()  # the first slice: its own chunk, before the shared
                    head = writer.count
            new = await writer.finish()
            # Only the first and the last slice can be partial.
            chunks = new[:head] + tuple(shared) + new[head:]
            if resolved == whole and "-" not in source.etag:
                etag = source.etag
            else:
                etag = await self._md5_of(source, resolved)
            part = await self._commit_part(bucket, key, upload_id, part_number, chunks, etag,
                                           None)
        except BaseException:
            await writer.discard()
            raise
        finally:
            self._store.pins.unpin(pin)
        writer.release()
        return part.info()

    async def _md5_of(self, source: fmt.Version, byte_range: ByteRange | None) -> str:
        """The MD5 of a range of a version (read, never written)."""
        digest = hashlib.md5()
        if byte_range is None:
            return digest.hexdigest()
        extra = self._store.pins.pin([c.id for c in source.chunks])
        stream = self._objects.stream(source, extra, byte_range.start, byte_range.length)
        try:
            async for data in stream:
                await run_blocking(digest.update, data)
        finally:
            await stream.aclose()
        return digest.hexdigest()

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        await run_blocking(self._get, bucket, key, upload_id)
        return [p.info() for p in await run_blocking(self._store.index.parts, upload_id)]

    async def complete(self, bucket: str, key: str, upload_id: str,
                       requested: list[CompletedPart], *, if_match: str | None,
                       if_none_match: str | None) -> ObjectInfo:
        store = self._store
        check_bucket(bucket)
        async with store.upload_locks.hold(upload_id):
            upload = await run_blocking(self._get, bucket, key, upload_id)
            stored, pin = await store.read_pinned(
                lambda: store.index.parts(upload_id),
                lambda parts: [c.id for p in parts for c in p.chunks])
            try:
                by_number = {p.part_number: p for p in stored}
                chosen = check_completion(requested, [p.info() for p in stored],
                                          min_part_size=store.min_part_size)
                chunks = tuple(c for p in chosen for c in by_number[p.part_number].chunks)
                size = sum(p.size for p in chosen)
                etag = multipart_etag(chosen)
                meta = completed_meta(upload.meta, chosen, upload_id)
                forget = Batch().delete_upload(upload, list(by_number))

                def build(current: fmt.Version | None, seq: int, name: str,
                          replicas: tuple[str, ...]) -> fmt.Version:
                    return fmt.Version(name, seq, bucket, key, size, etag, time.time_ns(), meta,
                                       chunks, replicas)

                version = await store.commit(bucket, key, build, if_match=if_match,
                                             if_none_match=if_none_match, also=forget)
            finally:
                store.pins.unpin(pin)
        await self._remove_files(upload)
        assert version is not None
        return version.info()

    async def abort(self, bucket: str, key: str, upload_id: str) -> None:
        store = self._store
        async with store.upload_locks.hold(upload_id):
            upload = await run_blocking(self._get, bucket, key, upload_id)
            numbers = [p.part_number for p in await run_blocking(store.index.parts, upload_id)]
            await store.shielded(run_blocking(store.index.write,
                                              Batch().delete_upload(upload, numbers)))
        store.garbage.set()
        await self._remove_files(upload)

    async def _remove_files(self, upload: fmt.Upload) -> None:
        """Best effort: what is left is found by the garbage collector."""
        try:
            await self._store.on_replicas(upload.replicas,
                                          lambda p: p.remove_upload_dir(upload.upload_id),
                                          "remove a finished upload")
        except Exception:  # noqa: BLE001 - the collector retries
            self._store.garbage.set()

    async def iter(self, bucket: str, prefix: str) -> list[UploadInfo]:
        check_bucket(bucket)
        await self._store.require_bucket(bucket)
        with os_errors("ListMultipartUploads"):
            uploads = await run_blocking(self._store.index.uploads, bucket, prefix)
        return [u.info() for u in uploads]
