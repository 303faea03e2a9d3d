"""The backend conformance suite: every Backend/MultipartBackend/CopyingBackend contract.

Subclass ``BackendConformance`` in a ``Test*`` class and supply an async ``backend``
fixture that yields a fresh, empty backend built with ``min_part_size=self.min_part_size``
and closes it afterwards::

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        async def backend(self, tmp_path):
            store = MyBackend(tmp_path, min_part_size=self.min_part_size)
            yield store
            await store.aclose()

The suite uses only the protocols of ``backends.core.base``: nothing here may depend on one
implementation.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import random
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace
from typing import Any, ClassVar

import pytest

from backends.core.base import (
    BodyFacts,
    CompletedPart,
    DescribedBody,
    ObjectMeta,
    ObjectStream,
    RangeRequest,
    Relay,
    bare,
)
from backends.core.checksums import new_hasher
from backends.core.errors import (
    BadDigest,
    BucketAlreadyOwnedByYou,
    BucketNotEmpty,
    EntityTooSmall,
    InvalidPart,
    InvalidPartOrder,
    InvalidRange,
    InvalidRequestForObject,
    NoSuchBucket,
    NoSuchKey,
    NoSuchUpload,
    PreconditionFailed,
)
from backends.core.upload_checksums import (
    COMPOSITE,
    FULL_OBJECT,
    UPLOAD_CHECKSUM,
    UploadChecksum,
    declare,
)
from backends.multipart import (
    COMPLETED_UPLOAD,
    PART_CHECKSUMS,
    PART_LAYOUT,
    multipart_etag,
    part_sizes,
)

MiB = 1 << 20

# Keys that a naive layout cannot hold; listed deliberately out of order.
TRICKY_KEYS = [
    "a0", "a/b", "a", "a-b", "a//b", "/lead", "trail/", "..", ".", "x/../y", "x/./y",
    "%%q", "%%o", "%25", "100%", "ü/ñ", "日本語/テキスト", "emoji-🎉", "d/x/y", "d", "d/x",
    "s" * 255, "t" * 300 + "/end", "é" * 200, "n/" + "%" * 120, "sp ace/tab\there",
    ".hidden/.file", "a/b/", "~tilde",
]


# Keys of the listing test: neighbours in UTF-8 order, objects that are prefixes of others.
LISTING_KEYS = ["a", "a/b", "a/b/c", "a-b", "a0", "a//b", "ab", "b", "b/", "b/a", "é", "é/x",
                "t" * 300, "t" * 300 + "/x", "t" * 299 + "u"]


def utf8_sorted(keys: Iterable[str]) -> list[str]:
    return sorted(keys, key=lambda k: k.encode("utf-8"))


def blob(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def body_of(data: bytes, chunk: int = 64 * 1024, pause: bool = False) -> Relay:
    """``data`` in ``chunk``-sized pieces; ``pause`` yields to the loop between pieces."""
    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(data), chunk):
            if pause:
                await asyncio.sleep(0)
            yield data[start:start + chunk]
    return bare(pieces())


class BodyFailure(Exception):
    """Raised by a body iterator in the middle of an upload."""


def failing_body(data: bytes, fail_after: int) -> Relay:
    async def pieces() -> AsyncIterator[bytes]:
        yield data[:fail_after]
        raise BodyFailure("client went away")
    return bare(pieces())


class ChecksumBody(DescribedBody):
    """A verifying body: its facts name the checksum once exhausted, like the S3 layer's."""

    __slots__ = ("_checksum", "_pieces")

    def __init__(self, data: bytes, checksum: tuple[str, str]) -> None:
        super().__init__(BodyFacts(checksum_algorithm=checksum[0]))
        self._pieces = [data[i:i + 4096] for i in range(0, len(data), 4096)]
        self._checksum = checksum

    async def __anext__(self) -> bytes:
        if not self._pieces:
            self.facts.checksum = self._checksum
            raise StopAsyncIteration
        return self._pieces.pop(0)


async def read_all(stream: ObjectStream) -> bytes:
    async with stream:
        return b"".join([chunk async for chunk in stream])


async def collect(iterator: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in iterator]


FULL_META = ObjectMeta(
    content_type="text/plain; charset=utf-8", content_encoding="gzip",
    content_disposition='attachment; filename="r.txt"', content_language="fr-CA",
    cache_control="max-age=60", expires="Wed, 21 Oct 2037 07:28:00 GMT",
    user={"owner": "ünïcode", "empty": "", "x-dash": "1"},
    tags={"project": "squall", "tier": "hot"},
    checksum=("CRC32", "AAAAAA=="),
)


class BackendConformance:
    """Contracts of backends.core.base, run against the ``backend`` fixture of a subclass."""

    min_part_size: int = 64 * 1024
    # Whether completion records the part sizes (backends.multipart.PART_LAYOUT); an
    # upstream S3 service completes uploads itself and does not.
    records_part_layout: bool = True
    # Keys a naive layout cannot hold; a subclass for a service that refuses some of them
    # may narrow this list, and the listing test's keys (and say why).
    tricky_keys: ClassVar[list[str]] = TRICKY_KEYS
    listing_keys: ClassVar[list[str]] = LISTING_KEYS

    @pytest.fixture
    async def bucket(self, backend: Any) -> str:
        name = f"conf-{uuid.uuid4().hex[:12]}"
        await backend.create_bucket(name)
        return name

    async def put(self, backend: Any, bucket: str, key: str, data: bytes,
                  meta: ObjectMeta | None = None, **kwargs: Any) -> Any:
        return await backend.put_object(bucket, key, body_of(data), meta=meta or ObjectMeta(),
                                        **kwargs)

    async def get(self, backend: Any, bucket: str, key: str, **kwargs: Any) -> bytes:
        return await read_all(await backend.get_object(bucket, key, **kwargs))

    async def keys(self, backend: Any, bucket: str, **kwargs: Any) -> list[str]:
        return [info.key for info in await collect(backend.iter_objects(bucket, **kwargs))]

    # -- buckets ---------------------------------------------------------------------

    async def test_bucket_lifecycle(self, backend: Any) -> None:
        names = [f"life-{uuid.uuid4().hex[:8]}-{i}" for i in (2, 0, 1)]
        for name in names:
            created = await backend.create_bucket(name)
            assert created.name == name and created.created > 0
        listed = await backend.list_buckets()
        assert [b.name for b in listed] == sorted(b.name for b in listed)
        assert set(names) <= {b.name for b in listed}
        head = await backend.head_bucket(names[0])
        assert head.name == names[0]
        assert head.created == next(b.created for b in listed if b.name == names[0])
        for name in names:
            await backend.delete_bucket(name)
            with pytest.raises(NoSuchBucket):
                await backend.head_bucket(name)
        assert not set(names) & {b.name for b in await backend.list_buckets()}

    async def test_create_existing_bucket(self, backend: Any, bucket: str) -> None:
        with pytest.raises(BucketAlreadyOwnedByYou):
            await backend.create_bucket(bucket)

    async def test_bucket_can_be_recreated_empty(self, backend: Any, bucket: str) -> None:
        await self.put(backend, bucket, "k", b"v")
        await backend.delete_object(bucket, "k")
        await backend.delete_bucket(bucket)
        await backend.create_bucket(bucket)
        assert await self.keys(backend, bucket) == []

    async def test_delete_bucket_not_empty(self, backend: Any, bucket: str) -> None:
        await self.put(backend, bucket, "deep/inside/k", b"v")
        with pytest.raises(BucketNotEmpty):
            await backend.delete_bucket(bucket)
        assert await self.get(backend, bucket, "deep/inside/k") == b"v"
        await backend.delete_object(bucket, "deep/inside/k")
        await backend.delete_bucket(bucket)

    async def test_missing_bucket(self, backend: Any) -> None:
        missing = f"missing-{uuid.uuid4().hex[:8]}"
        with pytest.raises(NoSuchBucket):
            await backend.head_bucket(missing)
        with pytest.raises(NoSuchBucket):
            await backend.delete_bucket(missing)
        with pytest.raises(NoSuchBucket):
            await self.put(backend, missing, "k", b"v")
        with pytest.raises(NoSuchBucket):
            await backend.get_object(missing, "k")
        with pytest.raises(NoSuchBucket):
            await backend.head_object(missing, "k")
        with pytest.raises(NoSuchBucket):
            await backend.delete_object(missing, "k")
        with pytest.raises(NoSuchBucket):
            await backend.replace_metadata(missing, "k", ObjectMeta())
        with pytest.raises(NoSuchBucket):
            await collect(backend.iter_objects(missing))
        with pytest.raises(NoSuchBucket):
            await backend.create_multipart_upload(missing, "k", meta=ObjectMeta())
        with pytest.raises(NoSuchBucket):
            await collect(backend.iter_multipart_uploads(missing))

    # -- objects ---------------------------------------------------------------------

    @pytest.mark.parametrize(("size", "chunk"), [
        (0, 1024), (1, 1024), (3 * MiB + 17, 100_003), (2 * MiB, 2 * MiB), (300_000, 7)])
    async def test_round_trip(self, backend: Any, bucket: str, size: int, chunk: int) -> None:
        data = blob(size, seed=size)
        info = await backend.put_object(bucket, "obj", body_of(data, chunk), meta=ObjectMeta())
        assert (info.bucket, info.key, info.size) == (bucket, "obj", size)
        assert info.etag == md5_hex(data)
        head = await backend.head_object(bucket, "obj")
        assert (head.size, head.etag, head.meta) == (size, md5_hex(data), ObjectMeta())
        assert head.last_modified > 0
        stream = await backend.get_object(bucket, "obj")
        assert stream.info.etag == md5_hex(data) and stream.content_length == size
        assert stream.byte_range is None
        assert await read_all(stream) == data
        [listed] = await collect(backend.iter_objects(bucket))
        assert (listed.key, listed.size, listed.etag) == ("obj", size, md5_hex(data))

    async def test_overwrite(self, backend: Any, bucket: str) -> None:
        await self.put(backend, bucket, "k", b"first version", ObjectMeta(user={"v": "1"}))
        info = await self.put(backend, bucket, "k", b"second")
        assert info.etag == md5_hex(b"second")
        assert await self.get(backend, bucket, "k") == b"second"
        head = await backend.head_object(bucket, "k")
        assert head.size == 6 and head.meta == ObjectMeta()

    async def test_content_md5(self, backend: Any, bucket: str) -> None:
        data = blob(5000)
        info = await self.put(backend, bucket, "k", data,
                              content_md5=hashlib.md5(data).digest())
        assert info.etag == md5_hex(data)

    async def test_bad_digest_keeps_old_object(self, backend: Any, bucket: str) -> None:
        await self.put(backend, bucket, "k", b"old")
        with pytest.raises(BadDigest):
            await self.put(backend, bucket, "k", b"new", content_md5=hashlib.md5(b"x").digest())
        assert await self.get(backend, bucket, "k") == b"old"
        with pytest.raises(BadDigest):
            await self.put(backend, bucket, "fresh", b"new",
                           content_md5=hashlib.md5(b"x").digest())
        with pytest.raises(NoSuchKey):
            await backend.head_object(bucket, "fresh")
        assert await self.keys(backend, bucket) == ["k"]

    async def test_failing_body_leaves_nothing(self, backend: Any, bucket: str) -> None:
        await self.put(backend, bucket, "k", b"old")
        data = blob(2 * MiB)
        for key in ("k", "new/key"):
            with pytest.raises(Exception):  # noqa: B017 - the body's own error, possibly wrapped
                await backend.put_object(bucket, key, failing_body(data, MiB + 5),
                                         meta=ObjectMeta())
        assert await self.get(backend, bucket, "k") == b"old"
        with pytest.raises(NoSuchKey):
            await backend.head_object(bucket, "new/key")
        assert await self.keys(backend, bucket) == ["k"]

    async def test_if_none_match(self, backend: Any, bucket: str) -> None:
        info = await self.put(backend, bucket, "k", b"one", if_none_match="*")
        assert info.etag == md5_hex(b"one")
        with pytest.raises(PreconditionFailed):
            await self.put(backend, bucket, "k", b"two", if_none_match="*")
        assert await self.get(backend, bucket, "k") == b"one"

    async def test_if_match(self, backend: Any, bucket: str) -> None:
        first = await self.put(backend, bucket, "k", b"one")
        second = await self.put(backend, bucket, "k", b"two", if_match=first.etag)
        assert await self.get(backend, bucket, "k") == b"two"
        with pytest.raises(PreconditionFailed):
            await self.put(backend, bucket, "k", b"three", if_match=first.etag)
        assert (await backend.head_object(bucket, "k")).etag == second.etag
        with pytest.raises(NoSuchKey):
            await self.put(backend, bucket, "absent", b"x", if_match=first.etag)
        with pytest.raises(NoSuchKey):
            await backend.head_object(bucket, "absent")

    @pytest.mark.parametrize(("request_", "start", "end"), [
        (RangeRequest(first=0, last=0), 0, 0),
        (RangeRequest(first=2, last=5), 2, 5),
        (RangeRequest(first=10), 10, 99_999),
        (RangeRequest(first=99_999), 99_999, 99_999),
        (RangeRequest(first=70_000, last=10**9), 70_000, 99_999),
        (RangeRequest(suffix=3), 99_997, 99_999),
        (RangeRequest(suffix=10**9), 0, 99_999),
        (RangeRequest(first=65_530, last=65_545), 65_530, 65_545),
    ])
    async def test_ranges(self, backend: Any, bucket: str, request_: RangeRequest,
                          start: int, end: int) -> None:
        data = blob(100_000, seed=3)
        await self.put(backend, bucket, "k", data)
        stream = await backend.get_object(bucket, "k", byte_range=request_)
        assert (stream.byte_range.start, stream.byte_range.end) == (start, end)
        assert stream.content_length == end - start + 1
        assert stream.info.size == len(data)
        assert await read_all(stream) == data[start:end + 1]

    @pytest.mark.parametrize("request_", [
        RangeRequest(first=100_000), RangeRequest(first=10**9, last=10**9 + 5),
        RangeRequest(suffix=0)])
    async def test_invalid_range(self, backend: Any, bucket: str,
                                 request_: RangeRequest) -> None:
        await self.put(backend, bucket, "k", blob(100_000))
        with pytest.raises(InvalidRange):
            await backend.get_object(bucket, "k", byte_range=request_)
        await self.put(backend, bucket, "empty", b"")
        with pytest.raises(InvalidRange):
            await backend.get_object(bucket, "empty", byte_range=RangeRequest(first=0))

    async def test_missing_key(self, backend: Any, bucket: str) -> None:
        await self.put(backend, bucket, "dir/k", b"v")
        for key in ("nope", "dir", "dir/", "dir/k/deeper", "dir/k2"):
            with pytest.raises(NoSuchKey):
                await backend.get_object(bucket, key)
            with pytest.raises(NoSuchKey):
                await backend.head_object(bucket, key)

    async def test_streams_close(self, backend: Any, bucket: str) -> None:
        data = blob(3 * MiB)
        await self.put(backend, bucket, "k", data)
        for _ in range(20):  # never iterated
            await (await backend.get_object(bucket, "k")).aclose()
        stream = await backend.get_object(bucket, "k")  # partly read
        first = await stream.__aiter__().__anext__()
        assert data.startswith(first)
        await stream.aclose()
        async with await backend.get_object(bucket, "k") as stream:
            assert b"".join([c async for c in stream]) == data
        await backend.delete_object(bucket, "k")
        await backend.delete_bucket(bucket)

    async def test_open_stream_is_not_torn_by_overwrite(self, backend: Any,
                                                        bucket: str) -> None:
        old, new = blob(3 * MiB, seed=1), blob(3 * MiB, seed=2)
        await self.put(backend, bucket, "k", old)
        stream = await backend.get_object(bucket, "k")
        await self.put(backend, bucket, "k", new)
        got = await read_all(stream)
        assert got in (old, new)
        assert stream.info.etag == md5_hex(got)

    async def test_metadata_round_trip(self, backend: Any, bucket: str) -> None:
        info = await self.put(backend, bucket, "k", b"data", FULL_META)
        assert info.meta == FULL_META
        assert (await backend.head_object(bucket, "k")).meta == FULL_META
        stream = await backend.get_object(bucket, "k")
        assert stream.info.meta == FULL_META
        await stream.aclose()
        [listed] = await collect(backend.iter_objects(bucket))
        assert listed.meta == FULL_META

    async def test_checksum_from_verifying_body(self, backend: Any, bucket: str) -> None:
        data = blob(10_000)
        body = ChecksumBody(data, ("SHA256", "c2hhMjU2LXZhbHVl"))
        info = await backend.put_object(bucket, "k", body,
                                        meta=ObjectMeta(checksum=("CRC32", "b2xk")))
        assert info.meta.checksum == ("SHA256", "c2hhMjU2LXZhbHVl")
        head = await backend.head_object(bucket, "k")
        assert head.meta.checksum == ("SHA256", "c2hhMjU2LXZhbHVl")
        assert head.etag == md5_hex(data)

    async def test_replace_metadata(self, backend: Any, bucket: str) -> None:
        data = blob(200_000)
        put = await self.put(backend, bucket, "k", data, ObjectMeta(user={"a": "1"}))
        info = await backend.replace_metadata(bucket, "k", FULL_META)
        assert (info.etag, info.size, info.meta) == (put.etag, put.size, FULL_META)
        head = await backend.head_object(bucket, "k")
        assert (head.etag, head.size, head.meta) == (put.etag, len(data), FULL_META)
        assert await self.get(backend, bucket, "k") == data
        emptier = ObjectMeta(tags={"only": "tags"})
        await backend.replace_metadata(bucket, "k", emptier)
        assert (await backend.head_object(bucket, "k")).meta == emptier
        with pytest.raises(NoSuchKey):
            await backend.replace_metadata(bucket, "absent", FULL_META)

    async def test_delete(self, backend: Any, bucket: str) -> None:
        await self.put(backend, bucket, "a/b/c", b"v")
        await self.put(backend, bucket, "a/b/d", b"w")
        await backend.delete_object(bucket, "a/b/c")
        with pytest.raises(NoSuchKey):
            await backend.get_object(bucket, "a/b/c")
        await backend.delete_object(bucket, "a/b/c")  # idempotent
        await backend.delete_object(bucket, "never/existed")
        await backend.delete_object(bucket, "a")  # a prefix, not an object
        assert await self.keys(backend, bucket) == ["a/b/d"]
        assert await self.get(backend, bucket, "a/b/d") == b"w"
        await backend.delete_object(bucket, "a/b/d")
        assert await self.keys(backend, bucket) == []
        await backend.delete_bucket(bucket)

    async def test_object_and_prefix_of_same_name(self, backend: Any, bucket: str) -> None:
        for key in ("d", "d/x", "d/x/y", "e/f", "e"):
            await self.put(backend, bucket, key, key.encode())
        assert await self.keys(backend, bucket) == ["d", "d/x", "d/x/y", "e", "e/f"]
        await backend.delete_object(bucket, "d/x")
        assert await self.get(backend, bucket, "d") == b"d"
        assert await self.get(backend, bucket, "d/x/y") == b"d/x/y"
        await backend.delete_object(bucket, "d/x/y")
        await backend.delete_object(bucket, "e")
        assert await self.keys(backend, bucket) == ["d", "e/f"]
        assert await self.get(backend, bucket, "d") == b"d"
        await self.put(backend, bucket, "d", b"d2")
        await self.put(backend, bucket, "e", b"e2")
        assert await self.get(backend, bucket, "d") == b"d2"
        assert await self.get(backend, bucket, "e") == b"e2"
        assert await self.keys(backend, bucket) == ["d", "e", "e/f"]

    async def test_tricky_keys(self, backend: Any, bucket: str) -> None:
        tricky = self.tricky_keys
        for key in tricky:
            await self.put(backend, bucket, key, key.encode(), ObjectMeta(user={"k": "v"}))
        for key in tricky:
            assert await self.get(backend, bucket, key) == key.encode(), key
            assert (await backend.head_object(bucket, key)).key == key
        infos = await collect(backend.iter_objects(bucket))
        assert [i.key for i in infos] == utf8_sorted(tricky)
        assert all(i.etag == md5_hex(i.key.encode()) for i in infos)
        assert all(i.meta.user == {"k": "v"} for i in infos)
        for key in tricky[::2]:
            await backend.delete_object(bucket, key)
        assert await self.keys(backend, bucket) == utf8_sorted(tricky[1::2])
        for key in tricky[1::2]:
            assert await self.get(backend, bucket, key) == key.encode(), key
            await backend.delete_object(bucket, key)
        assert await self.keys(backend, bucket) == []
        await backend.delete_bucket(bucket)

    async def test_listing_prefix_and_start_after(self, backend: Any, bucket: str) -> None:
        keys = self.listing_keys
        for key in keys:
            await self.put(backend, bucket, key, b"")
        ordered = utf8_sorted(keys)
        prefixes = ["", "a", "a/", "a/b", "a-", "b/", "é", "t" * 299, "t" * 300, "zz", "/"]
        afters = ["", "a", "a/", "a/b", "a-b", "a/b/c", "b", "é", "t" * 300, "zzz"]
        for prefix in prefixes:
            for after in afters:
                expected = [k for k in ordered
                            if k.startswith(prefix) and k.encode() > after.encode()]
                got = await self.keys(backend, bucket, prefix=prefix, start_after=after)
                assert got == expected, (prefix, after)

    async def test_listing_stops_early(self, backend: Any, bucket: str) -> None:
        for i in range(30):
            await self.put(backend, bucket, f"k/{i:03d}", b"")
        iterator = backend.iter_objects(bucket, prefix="k/")
        seen = []
        async for info in iterator:
            seen.append(info.key)
            if len(seen) == 3:
                break
        await iterator.aclose()
        assert seen == ["k/000", "k/001", "k/002"]

    # -- multipart -------------------------------------------------------------------

    async def _upload(self, backend: Any, bucket: str, key: str,
                      sizes: list[int], meta: ObjectMeta | None = None) -> tuple[Any, list]:
        upload = await backend.create_multipart_upload(bucket, key, meta=meta or ObjectMeta())
        parts = []
        for number, size in enumerate(sizes, start=1):
            data = blob(size, seed=number)
            part = await backend.upload_part(bucket, key, upload.upload_id, number,
                                             body_of(data, 50_000))
            assert (part.part_number, part.size, part.etag) == (number, size, md5_hex(data))
            parts.append((part, data))
        return upload, parts

    async def test_multipart_round_trip(self, backend: Any, bucket: str) -> None:
        low = self.min_part_size
        upload, parts = await self._upload(backend, bucket, "mp/obj", [low, low + 1, 10],
                                           FULL_META)
        assert (upload.bucket, upload.key, upload.meta) == (bucket, "mp/obj", FULL_META)
        listed = await backend.list_parts(bucket, "mp/obj", upload.upload_id)
        assert [p.part_number for p in listed] == [1, 2, 3]
        assert [p.etag for p in listed] == [p.etag for p, _ in parts]
        info = await backend.complete_multipart_upload(
            bucket, "mp/obj", upload.upload_id,
            [CompletedPart(p.part_number, p.etag) for p, _ in parts])
        whole = b"".join(data for _, data in parts)
        assert info.etag == multipart_etag([p for p, _ in parts])
        assert info.etag.endswith("-3") and info.size == len(whole)
        head = await backend.head_object(bucket, "mp/obj")
        # The object's checksum is the parts' composite one; these parts carry none.
        expected_meta = replace(FULL_META, checksum=None)
        if self.records_part_layout:
            assert part_sizes(head) == [low, low + 1, 10]
        # Entries a backend keeps for itself (the layout, the upload it came from).
        user = {k: v for k, v in head.meta.user.items()
                if k not in (PART_LAYOUT, COMPLETED_UPLOAD, PART_CHECKSUMS)}
        head = replace(head, meta=replace(head.meta, user=user))
        assert (head.etag, head.size, head.meta) == (info.etag, len(whole), expected_meta)
        assert await self.get(backend, bucket, "mp/obj") == whole
        with pytest.raises(NoSuchUpload):
            await backend.list_parts(bucket, "mp/obj", upload.upload_id)
        assert await collect(backend.iter_multipart_uploads(bucket)) == []
        await backend.delete_object(bucket, "mp/obj")
        await backend.delete_bucket(bucket)

    async def test_part_replacement(self, backend: Any, bucket: str) -> None:
        upload, parts = await self._upload(backend, bucket, "k", [self.min_part_size, 5])
        replacement = blob(self.min_part_size + 100, seed=99)
        part = await backend.upload_part(bucket, "k", upload.upload_id, 1,
                                         body_of(replacement))
        listed = await backend.list_parts(bucket, "k", upload.upload_id)
        assert [(p.part_number, p.etag, p.size) for p in listed] == [
            (1, md5_hex(replacement), len(replacement)), (2, parts[1][0].etag, 5)]
        with pytest.raises(InvalidPart):  # the replaced part's ETag is gone
            await backend.complete_multipart_upload(
                bucket, "k", upload.upload_id,
                [CompletedPart(1, parts[0][0].etag), CompletedPart(2, parts[1][0].etag)])
        await backend.complete_multipart_upload(
            bucket, "k", upload.upload_id,
            [CompletedPart(1, f'"{part.etag}"'), CompletedPart(2, parts[1][0].etag)])
        assert await self.get(backend, bucket, "k") == replacement + parts[1][1]

    async def test_completion_errors(self, backend: Any, bucket: str) -> None:
        small = max(1, self.min_part_size // 2)
        upload, parts = await self._upload(backend, bucket, "k",
                                           [self.min_part_size, small, 3])
        uid = upload.upload_id
        done = [CompletedPart(p.part_number, p.etag) for p, _ in parts]
        with pytest.raises(InvalidPartOrder):
            await backend.complete_multipart_upload(bucket, "k", uid, [done[1], done[0]])
        with pytest.raises(InvalidPartOrder):
            await backend.complete_multipart_upload(bucket, "k", uid, [done[0], done[0]])
        with pytest.raises(InvalidPart):
            await backend.complete_multipart_upload(bucket, "k", uid, [])
        with pytest.raises(InvalidPart):
            await backend.complete_multipart_upload(bucket, "k", uid,
                                                    [done[0], CompletedPart(7, done[1].etag)])
        with pytest.raises(InvalidPart):
            await backend.complete_multipart_upload(bucket, "k", uid,
                                                    [CompletedPart(1, "0" * 32)])
        with pytest.raises(EntityTooSmall):
            await backend.complete_multipart_upload(bucket, "k", uid, done)
        with pytest.raises(NoSuchKey):
            await backend.head_object(bucket, "k")
        # Still usable: parts 1 and 3 (only the last may be small).
        info = await backend.complete_multipart_upload(bucket, "k", uid, [done[0], done[2]])
        assert info.etag == multipart_etag([parts[0][0], parts[2][0]])
        assert await self.get(backend, bucket, "k") == parts[0][1] + parts[2][1]

    async def test_single_small_part(self, backend: Any, bucket: str) -> None:
        upload, parts = await self._upload(backend, bucket, "k", [1])
        info = await backend.complete_multipart_upload(
            bucket, "k", upload.upload_id, [CompletedPart(1, parts[0][0].etag)])
        assert info.etag.endswith("-1")
        assert await self.get(backend, bucket, "k") == parts[0][1]

    async def test_abort(self, backend: Any, bucket: str) -> None:
        upload, parts = await self._upload(backend, bucket, "k", [100])
        await backend.abort_multipart_upload(bucket, "k", upload.upload_id)
        uid = upload.upload_id
        with pytest.raises(NoSuchUpload):
            await backend.abort_multipart_upload(bucket, "k", uid)
        with pytest.raises(NoSuchUpload):
            await backend.list_parts(bucket, "k", uid)
        with pytest.raises(NoSuchUpload):
            await backend.upload_part(bucket, "k", uid, 2, body_of(b"x"))
        with pytest.raises(NoSuchUpload):
            await backend.complete_multipart_upload(bucket, "k", uid,
                                                    [CompletedPart(1, parts[0][0].etag)])
        assert await collect(backend.iter_multipart_uploads(bucket)) == []
        with pytest.raises(NoSuchKey):
            await backend.head_object(bucket, "k")
        await backend.delete_bucket(bucket)

    async def test_unknown_upload_ids(self, backend: Any, bucket: str) -> None:
        other = f"other-{uuid.uuid4().hex[:8]}"
        await backend.create_bucket(other)
        upload = await backend.create_multipart_upload(bucket, "k", meta=ObjectMeta())
        wrong_places = [(bucket, "other-key"), (other, "k")]
        for wrong_bucket, wrong_key in wrong_places:
            with pytest.raises(NoSuchUpload):
                await backend.list_parts(wrong_bucket, wrong_key, upload.upload_id)
            with pytest.raises(NoSuchUpload):
                await backend.upload_part(wrong_bucket, wrong_key, upload.upload_id, 1,
                                          body_of(b"x"))
            with pytest.raises(NoSuchUpload):
                await backend.abort_multipart_upload(wrong_bucket, wrong_key,
                                                     upload.upload_id)
        for bogus in ("nonexistent", "../../../etc", "", "a/b", "." * 40, "x" * 300):
            with pytest.raises(NoSuchUpload):
                await backend.list_parts(bucket, "k", bogus)
            with pytest.raises(NoSuchUpload):
                await backend.upload_part(bucket, "k", bogus, 1, body_of(b"x"))
            with pytest.raises(NoSuchUpload):
                await backend.complete_multipart_upload(bucket, "k", bogus,
                                                        [CompletedPart(1, "0" * 32)])
            with pytest.raises(NoSuchUpload):
                await backend.abort_multipart_upload(bucket, "k", bogus)
        assert await backend.list_parts(bucket, "k", upload.upload_id) == []

    async def test_iter_multipart_uploads(self, backend: Any, bucket: str) -> None:
        created = []
        for key in ("b", "a/x", "b", "a", "c/d", "b"):
            created.append(await backend.create_multipart_upload(bucket, key,
                                                                 meta=ObjectMeta()))
        listed = await collect(backend.iter_multipart_uploads(bucket))
        expected = sorted(created, key=lambda u: (u.key.encode(), u.initiated, u.upload_id))
        assert [(u.key, u.upload_id) for u in listed] == [
            (u.key, u.upload_id) for u in expected]
        assert all(u.bucket == bucket for u in listed)
        prefixed = await collect(backend.iter_multipart_uploads(bucket, prefix="a"))
        assert [u.key for u in prefixed] == ["a", "a/x"]
        assert await collect(backend.iter_multipart_uploads(bucket, prefix="zz")) == []

    async def test_delete_bucket_aborts_uploads(self, backend: Any, bucket: str) -> None:
        upload = await backend.create_multipart_upload(bucket, "k", meta=ObjectMeta())
        await backend.upload_part(bucket, "k", upload.upload_id, 1, body_of(b"part"))
        await backend.put_object(bucket, "obj", body_of(b"x"), meta=ObjectMeta())
        with pytest.raises(BucketNotEmpty):  # objects remain: the upload stays too
            await backend.delete_bucket(bucket)
        assert [u.upload_id for u in await collect(backend.iter_multipart_uploads(bucket))] \
            == [upload.upload_id]
        await backend.delete_object(bucket, "obj")
        other = await backend.create_multipart_upload(bucket, "k2", meta=ObjectMeta())
        await backend.delete_bucket(bucket)  # only uploads remain: aborted with it
        with pytest.raises(NoSuchBucket):
            await backend.head_bucket(bucket)
        await backend.create_bucket(bucket)
        assert await collect(backend.iter_multipart_uploads(bucket)) == []
        for gone in (upload, other):
            with pytest.raises(NoSuchUpload):
                await backend.list_parts(bucket, gone.key, gone.upload_id)
        await backend.delete_bucket(bucket)

    async def test_upload_part_checks(self, backend: Any, bucket: str) -> None:
        upload = await backend.create_multipart_upload(bucket, "k", meta=ObjectMeta())
        uid = upload.upload_id
        with pytest.raises(BadDigest):
            await backend.upload_part(bucket, "k", uid, 1, body_of(b"data"),
                                      content_md5=hashlib.md5(b"other").digest())
        with pytest.raises(Exception):  # noqa: B017 - the body's own error, possibly wrapped
            await backend.upload_part(bucket, "k", uid, 2, failing_body(blob(MiB), 1000))
        assert await backend.list_parts(bucket, "k", uid) == []
        part = await backend.upload_part(bucket, "k", uid, 3,
                                         ChecksumBody(b"abc", ("CRC32C", "Y2hr")),
                                         content_md5=hashlib.md5(b"abc").digest())
        assert part.checksum == ("CRC32C", "Y2hr")
        [listed] = await backend.list_parts(bucket, "k", uid)
        assert (listed.part_number, listed.etag, listed.checksum) == (
            3, md5_hex(b"abc"), ("CRC32C", "Y2hr"))

    @pytest.mark.parametrize(("algorithm", "kind"), [("SHA256", COMPOSITE),
                                                     ("CRC32C", FULL_OBJECT)])
    async def test_declared_upload_checksum(self, backend: Any, bucket: str, algorithm: str,
                                            kind: str) -> None:
        # Checksums as the S3 layer's bodies report them (values computed for real, so a
        # full-object CRC combined from the parts can be compared with the whole one).
        def value(data: bytes) -> tuple[str, str]:
            hasher = new_hasher(algorithm)
            hasher.update(data)
            return algorithm, hasher.b64digest()

        meta = declare(ObjectMeta(user={"run": "1"}), UploadChecksum(algorithm, kind))
        upload = await backend.create_multipart_upload(bucket, "ck", meta=meta)
        uid = upload.upload_id
        with pytest.raises(InvalidRequestForObject):
            await backend.upload_part(bucket, "ck", uid, 1, body_of(b"no checksum"))
        with pytest.raises(InvalidRequestForObject):
            await backend.upload_part(bucket, "ck", uid, 1,
                                      ChecksumBody(b"other", ("CRC64NVME", "AAAAAAAAAAA=")))
        assert await backend.list_parts(bucket, "ck", uid) == []
        datas = [blob(self.min_part_size, seed=7), blob(999, seed=8)]
        done = []
        for number, data in enumerate(datas, start=1):
            part = await backend.upload_part(bucket, "ck", uid, number,
                                             ChecksumBody(data, value(data)))
            assert part.checksum == value(data)
            done.append(CompletedPart(number, part.etag))
        info = await backend.complete_multipart_upload(bucket, "ck", uid, done)
        whole = b"".join(datas)
        if kind == FULL_OBJECT:
            expected = value(whole)
        else:
            hasher = new_hasher(algorithm)
            for data in datas:
                hasher.update(base64.b64decode(value(data)[1]))
            expected = (algorithm, f"{hasher.b64digest()}-2")
        assert info.meta.checksum == expected
        head = await backend.head_object(bucket, "ck")
        assert head.meta.checksum == expected
        assert UPLOAD_CHECKSUM not in head.meta.user and head.meta.user["run"] == "1"
        assert await self.get(backend, bucket, "ck") == whole

    async def test_complete_conditions(self, backend: Any, bucket: str) -> None:
        await self.put(backend, bucket, "k", b"existing")
        upload, parts = await self._upload(backend, bucket, "k", [10])
        done = [CompletedPart(1, parts[0][0].etag)]
        with pytest.raises(PreconditionFailed):
            await backend.complete_multipart_upload(bucket, "k", upload.upload_id, done,
                                                    if_none_match="*")
        with pytest.raises(PreconditionFailed):
            await backend.complete_multipart_upload(bucket, "k", upload.upload_id, done,
                                                    if_match=md5_hex(b"other"))
        assert await self.get(backend, bucket, "k") == b"existing"
        await backend.complete_multipart_upload(bucket, "k", upload.upload_id, done,
                                                if_match=md5_hex(b"existing"))
        assert await self.get(backend, bucket, "k") == parts[0][1]

    # -- copy ------------------------------------------------------------------------

    async def test_copy_object(self, backend: Any, bucket: str) -> None:
        other = f"copy-{uuid.uuid4().hex[:8]}"
        await backend.create_bucket(other)
        data = blob(3 * MiB + 1)
        src = await self.put(backend, bucket, "src", data, ObjectMeta(user={"from": "src"}))
        for dst_bucket, dst_key in ((bucket, "dst/copy"), (other, "src")):
            info = await backend.copy_object(bucket, "src", dst_bucket, dst_key,
                                             meta=FULL_META, src_etag=src.etag)
            assert (info.bucket, info.key, info.size) == (dst_bucket, dst_key, len(data))
            assert info.etag == src.etag and info.meta == FULL_META
            assert await self.get(backend, dst_bucket, dst_key) == data
            assert (await backend.head_object(dst_bucket, dst_key)).meta == FULL_META
        assert (await backend.head_object(bucket, "src")).meta == ObjectMeta(
            user={"from": "src"})

    async def test_copy_onto_itself(self, backend: Any, bucket: str) -> None:
        src = await self.put(backend, bucket, "k", b"same bytes")
        info = await backend.copy_object(bucket, "k", bucket, "k", meta=FULL_META)
        assert info.etag == src.etag
        assert await self.get(backend, bucket, "k") == b"same bytes"
        assert (await backend.head_object(bucket, "k")).meta == FULL_META

    async def test_copy_errors(self, backend: Any, bucket: str) -> None:
        await self.put(backend, bucket, "src", b"data")
        with pytest.raises(PreconditionFailed):
            await backend.copy_object(bucket, "src", bucket, "dst", meta=ObjectMeta(),
                                      src_etag=md5_hex(b"other"))
        with pytest.raises(NoSuchKey):
            await backend.copy_object(bucket, "absent", bucket, "dst", meta=ObjectMeta())
        with pytest.raises(NoSuchBucket):
            await backend.copy_object(bucket, "src", "no-such-bucket-x", "dst",
                                      meta=ObjectMeta())
        with pytest.raises(NoSuchBucket):
            await backend.copy_object("no-such-bucket-x", "src", bucket, "dst",
                                      meta=ObjectMeta())
        assert await self.keys(backend, bucket) == ["src"]

    async def test_copy_multipart_source(self, backend: Any, bucket: str) -> None:
        upload, parts = await self._upload(backend, bucket, "mp", [self.min_part_size, 7])
        done = await backend.complete_multipart_upload(
            bucket, "mp", upload.upload_id, [CompletedPart(p.part_number, p.etag)
                                             for p, _ in parts])
        await backend.copy_object(bucket, "mp", bucket, "copy", meta=ObjectMeta(),
                                  src_etag=done.etag)
        assert await self.get(backend, bucket, "copy") == parts[0][1] + parts[1][1]

    # -- concurrency -----------------------------------------------------------------

    async def test_concurrent_puts_last_completed_wins(self, backend: Any,
                                                       bucket: str) -> None:
        versions = [blob(400_000, seed=100 + i) for i in range(8)]
        completed: list[str] = []

        async def writer(data: bytes) -> None:
            info = await backend.put_object(bucket, "hot", body_of(data, 30_000, pause=True),
                                            meta=ObjectMeta())
            completed.append(info.etag)

        await asyncio.gather(*(writer(v) for v in versions))
        head = await backend.head_object(bucket, "hot")
        assert head.etag == completed[-1]
        data = await self.get(backend, bucket, "hot")
        assert md5_hex(data) == head.etag and data in versions
        assert await self.keys(backend, bucket) == ["hot"]

    async def test_no_torn_reads(self, backend: Any, bucket: str) -> None:
        versions = [blob(300_000, seed=200 + i) for i in range(6)]
        await self.put(backend, bucket, "k", versions[0])
        done = asyncio.Event()
        reads: list[bytes] = []

        async def overwrite() -> None:
            for data in versions[1:] * 2:
                await backend.put_object(bucket, "k", body_of(data, 40_000, pause=True),
                                         meta=ObjectMeta())
            done.set()

        async def read() -> None:
            while not done.is_set() or not reads:
                stream = await backend.get_object(bucket, "k")
                data = await read_all(stream)
                assert md5_hex(data) == stream.info.etag
                reads.append(data)

        await asyncio.gather(overwrite(), read())
        assert all(data in versions for data in reads)

    async def test_concurrent_puts_and_deletes_in_one_directory(self, backend: Any,
                                                                bucket: str) -> None:
        async def churn(i: int) -> None:
            for round_ in range(5):
                await self.put(backend, bucket, f"p/q/{i}", f"{i}-{round_}".encode())
                if round_ < 4:
                    await backend.delete_object(bucket, f"p/q/{i}")

        await asyncio.gather(*(churn(i) for i in range(6)))
        assert await self.keys(backend, bucket) == [f"p/q/{i}" for i in range(6)]
        for i in range(6):
            assert await self.get(backend, bucket, f"p/q/{i}") == f"{i}-4".encode()
