"""The storage interface every Squall layer speaks: types and protocols.

A backend is a complete persistent object store: buckets, immutable objects (data +
system and user metadata), sorted listing, deletion. The cache tier wraps a backend and
implements the same protocols, so layers compose by explicit delegation.

Contracts shared by every implementation:

* Bodies are ``AsyncIterator[bytes]``; a write takes a :class:`DescribedBody`, which
  carries its checksum and declared length with it. A ``put`` consumes the iterator; if the iterator
  raises (client disconnect, checksum mismatch), nothing is committed and no space stays
  used. A ``get`` returns an :class:`ObjectStream` that the *caller* closes
  (``async with stream`` or ``await stream.aclose()``), also when it reads nothing.
* Writes are atomic: a reader sees the previous object or the new one, never a mix.
* Errors are the typed exceptions of :mod:`backends.core.errors`, never OSError or SDK errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from backends.core.errors import InvalidRange
from backends.core.regions import FileRegion, take_regions

#: A body read from a store: any async iterator of bytes. What a write takes is a
#: :class:`DescribedBody` (the bytes and what is known of them).
Body = AsyncIterator[bytes]

DEFAULT_CONTENT_TYPE = "binary/octet-stream"
CHECKSUM_ALGORITHMS = ("CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256")


@dataclass(frozen=True, slots=True)
class ByteRange:
    """A resolved, satisfiable byte range: ``start`` and ``end`` inclusive."""

    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True, slots=True)
class RangeRequest:
    """An HTTP byte range as asked for, before the object size is known.

    ``bytes=a-b`` -> first=a, last=b; ``bytes=a-`` -> first=a; ``bytes=-n`` -> suffix=n.
    """

    first: int | None = None
    last: int | None = None
    suffix: int | None = None

    def resolve(self, size: int) -> ByteRange:
        """The satisfiable range within an object of ``size`` bytes, or InvalidRange."""
        if self.suffix is not None:
            if self.suffix == 0 or size == 0:
                raise InvalidRange(size)
            return ByteRange(max(0, size - self.suffix), size - 1)
        first = self.first or 0
        if first >= size:
            raise InvalidRange(size)
        last = size - 1 if self.last is None else min(self.last, size - 1)
        return ByteRange(first, last)


@dataclass(frozen=True, slots=True)
class ObjectMeta:
    """What a client says about an object, kept with it and returned on GET/HEAD."""

    content_type: str = DEFAULT_CONTENT_TYPE
    content_encoding: str | None = None
    content_disposition: str | None = None
    content_language: str | None = None
    cache_control: str | None = None
    expires: str | None = None
    user: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    # Full-object additional checksum: (algorithm from CHECKSUM_ALGORITHMS, base64 value).
    checksum: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """A stored object version as the system knows it."""

    bucket: str
    key: str
    size: int
    etag: str  # unquoted: 32 hex digits, or "<hex>-<parts>" for multipart objects
    last_modified: float  # seconds since the epoch
    meta: ObjectMeta = field(default_factory=ObjectMeta)
    version_id: str | None = None


@dataclass(frozen=True, slots=True)
class BucketInfo:
    name: str
    created: float  # seconds since the epoch


@dataclass(frozen=True, slots=True)
class UploadInfo:
    bucket: str
    key: str
    upload_id: str
    initiated: float
    meta: ObjectMeta = field(default_factory=ObjectMeta)


@dataclass(frozen=True, slots=True)
class PartInfo:
    part_number: int
    etag: str  # unquoted MD5 hex of the part
    size: int
    last_modified: float
    checksum: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class CompletedPart:
    """One entry of a CompleteMultipartUpload request."""

    part_number: int
    etag: str  # unquoted
    # The part's checksums as named in the request: (algorithm, base64 value) pairs.
    checksums: tuple[tuple[str, str], ...] = ()


class ObjectStream:
    """An open object: its info, the resolved range, and a body the caller must close."""

    __slots__ = ("_body", "byte_range", "info")

    def __init__(self, info: ObjectInfo, body: AsyncIterator[bytes],
                 byte_range: ByteRange | None = None) -> None:
        self.info = info
        self.byte_range = byte_range
        self._body = body

    @property
    def content_length(self) -> int:
        return self.byte_range.length if self.byte_range else self.info.size

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._body

    async def take_regions(self) -> list[FileRegion] | None:
        """The rest of the body as file regions, if it lies in open files (see
        :func:`backends.core.regions.take_regions`); the stream must still be closed."""
        return await take_regions(self._body)

    async def aclose(self) -> None:
        aclose = getattr(self._body, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


@dataclass(slots=True)
class BodyFacts:
    """What is known of an upload body's bytes besides the bytes.

    One instance is shared by a body and every wrapper made of it (a throttle, a counter,
    a re-read of its spooled bytes), so what the body learns while it is read reaches every
    holder, whatever the wrappers between them:

    * ``checksum``: ``(ALGORITHM, base64)`` of the additional checksum the body verified,
      set once it is exhausted (the S3 layer's request bodies; see :func:`final_meta`), or
      known from the start (a flush of a cached object);
    * ``checksum_algorithm``: the algorithm of that checksum, known before the first byte
      (what a peer recomputes when the body crosses to another member);
    * ``declared_length``: the byte count the request declared, a sizing hint that the
      body's end still checks;
    * ``verified_md5``: the MD5 of the bytes, computed by this process as it wrote them
      into the files the body's regions come from (a flush of the cache tier), which a
      backend copying those regions file to file may take instead of hashing them again.
    """

    checksum: tuple[str, str] | None = None
    checksum_algorithm: str | None = None
    declared_length: int | None = None
    verified_md5: bytes | None = None


class DescribedBody(AsyncIterator[bytes]):
    """An upload body: what every ``put_object``, ``upload_part`` and ``write_at`` takes.

    Its bytes are the iteration; :class:`BodyFacts` in ``facts`` says what else is known.
    A wrapper never makes facts of its own for bytes that come from another body: it is
    built with ``facts=body.facts`` (:class:`Relay` for a plain transformation), so a
    checksum cannot be lost between the S3 layer and a backend. Bytes this process makes
    itself start with :func:`bare`.
    """

    __slots__ = ("facts",)

    def __init__(self, facts: BodyFacts) -> None:
        self.facts = facts

    def __aiter__(self) -> Self:
        return self

    async def aclose(self) -> None:
        """Close what the body reads from; a body that holds nothing open has nothing to do."""


class Relay(DescribedBody):
    """``source``'s chunks under ``facts`` (those of the body ``source`` is made of)."""

    __slots__ = ("_source",)

    def __init__(self, source: AsyncIterator[bytes], facts: BodyFacts) -> None:
        super().__init__(facts)
        self._source = source

    async def __anext__(self) -> bytes:
        return await self._source.__anext__()

    async def take_regions(self) -> list[FileRegion] | None:
        """The source's rest as file regions, if it lies in open files."""
        return await take_regions(self._source)

    async def aclose(self) -> None:
        aclose = getattr(self._source, "aclose", None)
        if aclose is not None:
            await aclose()


def bare(source: AsyncIterator[bytes], *, declared_length: int | None = None) -> Relay:
    """A body of bytes this process makes itself (no request body behind them)."""
    return Relay(source, BodyFacts(declared_length=declared_length))


def final_meta(meta: ObjectMeta, body: DescribedBody) -> ObjectMeta:
    """``meta`` completed with the checksum a verifying body learnt while it was read.

    The S3 layer hands backends bodies that verify a checksum sent in a header or in an
    aws-chunked trailer; such a body's ``facts.checksum`` is ``(algorithm, base64)`` once
    exhausted. Backends call this after consuming the body, before committing.
    """
    checksum = body.facts.checksum
    if checksum is None or meta.checksum == checksum:
        return meta
    return replace(meta, checksum=checksum)


@runtime_checkable
class Backend(Protocol):
    """Buckets and objects: the operations every storage layer provides."""

    async def list_buckets(self) -> list[BucketInfo]: ...

    async def create_bucket(self, bucket: str) -> BucketInfo:
        """Raises BucketAlreadyOwnedByYou if it exists."""

    async def head_bucket(self, bucket: str) -> BucketInfo:
        """Raises NoSuchBucket."""

    async def delete_bucket(self, bucket: str) -> None:
        """Raises NoSuchBucket, BucketNotEmpty (objects remain). Multipart uploads in
        progress are aborted with the bucket, as S3 does; with objects they stay."""

    async def put_object(self, bucket: str, key: str, body: DescribedBody, *, meta: ObjectMeta,
                         content_md5: bytes | None = None, if_match: str | None = None,
                         if_none_match: str | None = None) -> ObjectInfo:
        """Store ``body`` atomically under ``key``.

        ``content_md5`` (16 raw bytes) is checked before commit (BadDigest). ``if_match``
        (an unquoted ETag) and ``if_none_match`` (only ``"*"``) are checked atomically with
        the commit (PreconditionFailed; NoSuchKey for if_match on a missing key).
        """

    async def get_object(self, bucket: str, key: str, *,
                         byte_range: RangeRequest | None = None) -> ObjectStream:
        """Open the object; the caller closes the stream. InvalidRange if unsatisfiable."""

    async def head_object(self, bucket: str, key: str) -> ObjectInfo: ...

    async def delete_object(self, bucket: str, key: str) -> None:
        """Idempotent: deleting a missing key succeeds. Raises NoSuchBucket."""

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        """Replace an object's metadata (tags included) without touching its data."""

    def iter_objects(self, bucket: str, *, prefix: str = "",
                     start_after: str = "") -> AsyncIterator[ObjectInfo]:
        """Objects whose key starts with ``prefix`` and sorts after ``start_after``, in
        ascending UTF-8 byte order of the key. Raises NoSuchBucket on first iteration."""

    async def aclose(self) -> None:
        """Release resources; called once by the application lifespan."""


@runtime_checkable
class MultipartBackend(Protocol):
    """Native multipart uploads (parts staged by the store, joined at completion)."""

    async def create_multipart_upload(self, bucket: str, key: str, *,
                                      meta: ObjectMeta) -> UploadInfo: ...

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, *,
                          content_md5: bytes | None = None) -> PartInfo:
        """Store one part (replacing an earlier one of the same number). NoSuchUpload."""

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        """Parts in ascending part-number order. NoSuchUpload."""

    async def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                        parts: Sequence[CompletedPart], *,
                                        if_match: str | None = None,
                                        if_none_match: str | None = None) -> ObjectInfo:
        """Join the named parts (see :func:`backends.multipart.check_completion`)."""

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        """NoSuchUpload if unknown."""

    def iter_multipart_uploads(self, bucket: str, *,
                               prefix: str = "") -> AsyncIterator[UploadInfo]:
        """In-progress uploads sorted by (key, initiated, upload_id)."""


@runtime_checkable
class CopyingBackend(Protocol):
    """Server-side copy without streaming the bytes through the caller."""

    async def copy_object(self, src_bucket: str, src_key: str, dst_bucket: str,
                          dst_key: str, *, meta: ObjectMeta,
                          src_etag: str | None = None) -> ObjectInfo:
        """Copy the current source; PreconditionFailed if ``src_etag`` no longer matches."""



@runtime_checkable
class RangedWriteBackend(Protocol):
    """Writes into an object at a byte offset (appends), each making a new version."""

    async def write_at(self, bucket: str, key: str, offset: int, body: DescribedBody, *,
                       meta: ObjectMeta | None = None, if_match: str | None = None,
                       append_only: bool = False) -> ObjectInfo:
        """Write ``body`` at ``offset`` of the current object; bytes after the written
        range stay. ``offset`` equal to the size appends (0 on a missing key creates the
        object); an offset below the size overwrites in place, unless ``append_only``
        (S3's ``x-amz-write-offset-bytes``). InvalidWriteOffset for an offset the object
        does not allow, also when another write changed the object meanwhile.
        ``meta`` None keeps the object's metadata. ``if_match`` is checked atomically
        with the commit.
        """


@runtime_checkable
class PartCopyingBackend(Protocol):
    """UploadPartCopy without streaming the bytes through the caller."""

    async def upload_part_copy(self, src_bucket: str, src_key: str, bucket: str, key: str,
                               upload_id: str, part_number: int, *,
                               byte_range: RangeRequest | None = None,
                               src_etag: str | None = None) -> PartInfo:
        """Make (a range of) the current source a part; PreconditionFailed if ``src_etag``
        no longer matches, InvalidRange, NoSuchUpload, NoSuchKey."""


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """One storage provider (a directory on its own disk or mount) of a striped store."""

    id: str
    path: str
    state: str  # "active" (new data is striped over it) or "standby"
    bandwidth_bytes_per_s: float | None = None


@runtime_checkable
class ElasticBackend(Protocol):
    """A store whose providers can be listed and added while it runs."""

    def providers(self) -> list[ProviderInfo]: ...

    async def add_provider(self, path: str, *, standby: bool = False) -> ProviderInfo:
        """Format ``path`` (empty or missing) as a provider; new chunks stripe over it at
        once unless ``standby``. ValueError (with the reason) for an unusable path."""

    def register_metrics(self, registry: object) -> None:
        """Export the store's metrics on a ``prometheus_client.CollectorRegistry``."""

    def status(self) -> dict[str, object]:
        """What ``/_squall/status`` reports about the store."""


@runtime_checkable
class ProbedBackend(Protocol):
    """A store behind a network link, whose reachability can be checked cheaply."""

    async def probe(self) -> str | None:
        """None when the store answers (whatever it answers), else why it cannot be
        reached. Never raises for an unreachable store."""


@runtime_checkable
class LocalBackend(Protocol):
    """A store whose data lives on file systems of this machine."""

    def devices(self) -> frozenset[int]:
        """The ``st_dev`` of every file system holding its data (a cache on one of them
        shares that disk's bandwidth with the store)."""
