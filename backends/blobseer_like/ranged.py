"""Ranged writes and appends: a new version that writes only the chunks it changes.

Chunks entirely before or after the written range are shared with the base version.
A chunk the range starts or ends inside is rewritten whole (its kept bytes around the
new ones); an append to an object whose last chunk is short rewrites that chunk too, so
repeated small appends (a FUSE file growing) do not fragment the blob into tiny chunks.
"""

from __future__ import annotations

import bisect
import hashlib
import time
from dataclasses import replace

from backends.blobseer_like import format as fmt
from backends.blobseer_like.chunks import starts_of
from backends.blobseer_like.objects import Objects, check_object_key, chunk_ids
from backends.blobseer_like.store import BlobStore, Builder
from backends.core.base import DescribedBody, ObjectInfo, ObjectMeta
from backends.core.errors import ConditionalRequestConflict, InvalidWriteOffset
from backends.core.keys import check_bucket


def chunk_map_etag(chunks: tuple[fmt.ChunkRef, ...]) -> str:
    """The ETag of a version made by a ranged write: MD5 over every chunk's CRC64 and
    size, ``-<chunks>`` (multipart-style: not the MD5 of the data, as S3 Express appends
    are not). An empty object gets the MD5 of nothing."""
    if not chunks:
        return hashlib.md5(b"").hexdigest()
    digest = hashlib.md5(b"".join(c.crc.to_bytes(8, "big") + c.size.to_bytes(8, "big")
                                  for c in chunks))
    return f"{digest.hexdigest()}-{len(chunks)}"


class RangedWrites:
    """``write_at`` of one store."""

    def __init__(self, store: BlobStore, objects: Objects) -> None:
        self._store = store
        self._objects = objects

    async def _chunk_bytes(self, ref: fmt.ChunkRef) -> bytes:
        return await self._store.pool.get(ref.provider).read(ref.id, ref.size, ref.crc)

    async def write_at(self, bucket: str, key: str, offset: int, body: DescribedBody, *,
                       meta: ObjectMeta | None, if_match: str | None,
                       append_only: bool = False) -> ObjectInfo:
        check_bucket(bucket)
        check_object_key(key)
        if offset < 0:
            raise InvalidWriteOffset("The write offset must not be negative.")
        store = self._store
        base, pin = await store.read_pinned(lambda: self._objects.current(bucket, key),
                                            chunk_ids)
        writer = self._objects.writer(md5=False)
        try:
            chunks = base.chunks if base is not None else ()
            size = base.size if base is not None else 0
            if offset > size or (append_only and offset != size):
                raise InvalidWriteOffset(f"The write offset {offset} does not match the "
                                         f"object's size {size}.", size=size)
            starts = starts_of(chunks)
            first = bisect.bisect_right(starts, offset) - 1
            if first == len(chunks) and chunks and chunks[-1].size < store.config.chunk_size:
                first -= 1  # append: rewrite the short last chunk with the new bytes
            if first < len(chunks) and offset > starts[first]:
                data = await self._chunk_bytes(chunks[first])
                await writer.feed(data[:offset - starts[first]])
            written = 0
            async for piece in body:
                written += len(piece)
                await writer.feed(piece)
            if written == 0 and base is not None:
                await writer.discard()
                return base.info()
            end = offset + written
            tail: tuple[fmt.ChunkRef, ...] = ()
            if end < size:
                last = bisect.bisect_right(starts, end) - 1
                if end > starts[last]:
                    data = await self._chunk_bytes(chunks[last])
                    await writer.feed(data[end - starts[last]:])
                    last += 1
                tail = chunks[last:]
            new_chunks = chunks[:first] + await writer.finish() + tail
            version = await store.commit(
                bucket, key, self._builder(bucket, key, base, offset, max(size, end),
                                           new_chunks, meta, append_only),
                if_match=if_match)
        except BaseException:
            await writer.discard()
            raise
        finally:
            store.pins.unpin(pin)
        writer.release()
        assert version is not None
        return version.info()

    def _builder(self, bucket: str, key: str, base: fmt.Version | None, offset: int,
                 size: int, chunks: tuple[fmt.ChunkRef, ...], meta: ObjectMeta | None,
                 append_only: bool) -> Builder:
        base_record = base.record if base is not None else None
        # A full-object checksum no longer describes the object.
        new_meta = replace(meta if meta is not None else
                           base.meta if base is not None else ObjectMeta(), checksum=None)
        etag = chunk_map_etag(chunks)

        def build(current: fmt.Version | None, seq: int, name: str,
                  replicas: tuple[str, ...]) -> fmt.Version:
            if (current.record if current is not None else None) != base_record:
                current_size = current.size if current is not None else 0
                if current_size < offset or (append_only and current_size != offset):
                    raise InvalidWriteOffset(
                        f"The object changed while it was written: its size is now "
                        f"{current_size}, the write offset {offset}.", size=current_size)
                raise ConditionalRequestConflict(
                    "The object changed while it was written; retry the write.")
            return fmt.Version(name, seq, bucket, key, size, etag, time.time_ns(), new_meta,
                               chunks, replicas)

        return build
