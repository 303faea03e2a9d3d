"""VersionedObjects: S3 versioning semantics over any Backend.

Every write to a versioned bucket runs under the key's lock, on the process that owns
the key (in a cluster, its owner: ``owns`` says which keys are this process's, and a
write of another key is refused with NotKeyOwner rather than run under a lock that
does not serialise it), in an order that keeps one invariant at every step, so a crash
anywhere leaves a valid state:

    the current object, when it exists, is the newest version of its key.

* overwrite: copy the current object to its record, then write the new current object;
* delete (new marker): copy the current object to its record, delete it, write the marker;
* delete a version: delete it; if the current object is then missing and the newest
  record holds data, copy that record to the current object, then delete the record.

A crash between two steps leaves a duplicate (the same version as current object and as
record) or a stale null record; readers skip both (current object first, newest null
wins). See docs/versioning.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from backends.core.base import (
    Backend,
    CopyingBackend,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    RangeRequest,
    bare,
)
from backends.core.errors import InvalidVersionId, NoSuchKey, NoSuchVersion
from backends.core.internal_keys import CONFIG_PREFIX, record_base
from backends.core.internal_keys import VERSION_RECORDS as RECORDS
from backends.core.streams import body_of
from backends.locks import NamedLocks
from gateway.protocol.errors import SourceIsDeleteMarker, VersionIsDeleteMarker
from gateway.versioning import ids
from gateway.versioning.errors import DeleteMarkerIsLatest, NotKeyOwner
from gateway.versioning.records import (
    ETAG,
    STAMP,
    Version,
    as_record,
    client_view,
    current_version,
    parse_record,
    stamp,
    unstamped,
    version_etag,
)
from gateway.versioning.state import BucketStates, VersioningStatus

Writer = Callable[[ObjectMeta], Awaitable[ObjectInfo]]
Owns = Callable[[str, str], bool]  # (bucket, key) -> whether this process owns the key


@dataclass(frozen=True, slots=True)
class DeleteOutcome:
    """What a DELETE did: the version it removed or the marker it made."""

    version_id: str | None  # None in an unversioned bucket
    delete_marker: bool


def check_version_id(version_id: str) -> None:
    if version_id != ids.NULL and not ids.is_version_id(version_id):
        raise InvalidVersionId("Invalid version id specified")


class VersionedObjects:
    """Objects of every bucket, with versions where the bucket has versioning."""

    def __init__(self, backend: Backend, *, owns: Owns | None = None) -> None:
        self._backend = backend
        self._owns = owns
        self._states = BucketStates(backend)
        self._ids = ids.VersionIds()
        self._locks = NamedLocks()

    def _check_owner(self, bucket: str, key: str) -> None:
        if self._owns is not None and not self._owns(bucket, key):
            raise NotKeyOwner(bucket, key)

    @property
    def backend(self) -> Backend:
        return self._backend

    # -- bucket status -----------------------------------------------------------------

    async def status(self, bucket: str) -> VersioningStatus:
        return await self._states.get(bucket)

    async def set_status(self, bucket: str, status: VersioningStatus) -> None:
        await self._backend.head_bucket(bucket)
        await self._states.put(bucket, status)

    async def _versioned(self, bucket: str) -> bool:
        return await self._states.get(bucket) is not VersioningStatus.UNVERSIONED

    # -- finding versions --------------------------------------------------------------

    async def _head_current(self, bucket: str, key: str) -> ObjectInfo | None:
        try:
            return await self._backend.head_object(bucket, key)
        except NoSuchKey:
            return None

    async def records(self, bucket: str, key: str) -> list[tuple[ObjectInfo, Version]]:
        """The version records of ``key``, newest first (stale duplicates included)."""
        found = []
        async for info in self._backend.iter_objects(bucket, prefix=record_base(key)):
            version = parse_record(info.key)
            if version is not None and version.key == key:
                found.append((info, version))
        return found

    async def find(self, bucket: str, key: str, version_id: str) -> Version | None:
        current = await self._head_current(bucket, key)
        if current is not None and current_version(current).version_id == version_id:
            return current_version(current)
        for _, version in await self.records(bucket, key):
            if version.version_id == version_id:
                return version  # the newest record with that id: a stale null is older
        return None

    async def _latest_record(self, bucket: str, key: str) -> Version | None:
        records = await self.records(bucket, key)
        return records[0][1] if records else None

    async def locate(self, bucket: str, key: str, version_id: str | None) -> Version:
        """The version a read of (key, version_id) means; raises like S3 does."""
        if version_id is None:
            current = await self._head_current(bucket, key)
            if current is not None:
                return current_version(current)
            latest = await self._latest_record(bucket, key)
            if latest is None:
                raise NoSuchKey(bucket, key)
            if latest.marker:
                raise DeleteMarkerIsLatest(bucket, key, latest.version_id)
            return latest
        check_version_id(version_id)
        found = await self.find(bucket, key, version_id)
        if found is None:
            raise NoSuchVersion(bucket, key, version_id)
        if found.marker:
            raise VersionIsDeleteMarker(bucket, key, version_id, ids.timestamp(found.order))
        return found

    async def source(self, bucket: str, key: str, version_id: str | None) -> Version | None:
        """The version a copy reads (None: the plain object of an unversioned bucket)."""
        if version_id is not None:
            check_version_id(version_id)
        if not await self._versioned(bucket):
            if version_id not in (None, ids.NULL):
                raise NoSuchVersion(bucket, key, version_id)
            return None
        try:
            return await self.locate(bucket, key, version_id)
        except VersionIsDeleteMarker as exc:
            raise SourceIsDeleteMarker(resource=f"{bucket}/{key}") from exc

    def view(self, info: ObjectInfo, version: Version | None) -> ObjectInfo:
        """``info`` as clients see it (``version`` None: an unversioned bucket)."""
        if version is None:
            meta = unstamped(info.meta)
            return info if meta is info.meta else _with_meta(info, meta)
        return client_view(info, version, versioned=True)

    # -- reads -------------------------------------------------------------------------

    async def head(self, bucket: str, key: str, *, version_id: str | None = None
                   ) -> ObjectInfo:
        if version_id is not None:
            check_version_id(version_id)
        if not await self._versioned(bucket):
            if version_id not in (None, ids.NULL):
                raise NoSuchVersion(bucket, key, version_id)
            return self.view(await self._backend.head_object(bucket, key), None)
        for _ in range(3):
            version = await self.locate(bucket, key, version_id)
            try:
                info = await self._backend.head_object(bucket, version.stored_key)
            except NoSuchKey:
                continue  # moved by a concurrent writer: locate again
            if self._still(info, version):
                return client_view(info, version, versioned=True)
        raise NoSuchVersion(bucket, key, version_id or ids.NULL)

    async def get(self, bucket: str, key: str, *, version_id: str | None = None,
                  byte_range: RangeRequest | None = None) -> ObjectStream:
        """Open a version; the caller closes the stream."""
        if version_id is not None:
            check_version_id(version_id)
        if not await self._versioned(bucket):
            if version_id not in (None, ids.NULL):
                raise NoSuchVersion(bucket, key, version_id)
            stream = await self._backend.get_object(bucket, key, byte_range=byte_range)
            stream.info = self.view(stream.info, None)
            return stream
        if version_id is None:
            try:
                stream = await self._backend.get_object(bucket, key, byte_range=byte_range)
            except NoSuchKey:
                pass
            else:
                stream.info = client_view(stream.info, current_version(stream.info),
                                          versioned=True)
                return stream
        for _ in range(3):
            version = await self.locate(bucket, key, version_id)
            try:
                stream = await self._backend.get_object(bucket, version.stored_key,
                                                        byte_range=byte_range)
            except NoSuchKey:
                continue
            if self._still(stream.info, version):
                stream.info = client_view(stream.info, version, versioned=True)
                return stream
            await stream.aclose()
        raise NoSuchVersion(bucket, key, version_id or ids.NULL)

    @staticmethod
    def _still(info: ObjectInfo, version: Version) -> bool:
        """Whether the object opened for ``version`` still holds that version."""
        return not version.is_current_object or \
            current_version(info).order == version.order

    # -- writes ------------------------------------------------------------------------

    async def write(self, bucket: str, key: str, meta: ObjectMeta, writer: Writer
                    ) -> ObjectInfo:
        """Make a new current version of ``key`` with ``writer(meta)``.

        ``writer`` stores the object under ``key`` with the metadata it is given (which
        carries the version stamp in a versioned bucket) and returns its ObjectInfo.
        """
        meta = unstamped(meta)
        status = await self._states.get(bucket)
        if status is VersioningStatus.UNVERSIONED:
            return self.view(await writer(meta), None)
        null = status is VersioningStatus.SUSPENDED
        self._check_owner(bucket, key)
        async with self._locks.hold((bucket, key)):
            current = await self._head_current(bucket, key)
            if current is not None and not (null and current_version(current).null):
                await self._archive(bucket, current)
            order = self._ids.new()
            info = await writer(stamp(meta, order, null=null))
            version = Version(key, order, null, False, key)
            if null:
                await self._drop_null_records(bucket, key, keep=None)
        return client_view(info, version, versioned=True)

    async def stamp_completed(self, bucket: str, key: str,
                              complete: Callable[[], Awaitable[ObjectInfo]]) -> ObjectInfo:
        """Complete a multipart upload as a new version (the stamp is set right after)."""
        async def writer(stamped: ObjectMeta) -> ObjectInfo:
            info = await complete()
            if STAMP not in stamped.user:
                return info
            return await self._backend.replace_metadata(
                bucket, key, _merge_stamp(info.meta, stamped))
        return await self.write(bucket, key, ObjectMeta(), writer)

    async def delete(self, bucket: str, key: str, *, version_id: str | None = None
                     ) -> DeleteOutcome:
        if version_id is not None:
            check_version_id(version_id)
        self._check_owner(bucket, key)
        status = await self._states.get(bucket)
        if status is VersioningStatus.UNVERSIONED:
            await self._backend.head_bucket(bucket)
            if version_id in (None, ids.NULL):
                await self._backend.delete_object(bucket, key)
            return DeleteOutcome(version_id, False)
        async with self._locks.hold((bucket, key)):
            if version_id is not None:
                found = await self.find(bucket, key, version_id)
                if found is not None:
                    await self._remove(bucket, found)
                return DeleteOutcome(version_id, found is not None and found.marker)
            return await self._add_marker(bucket, key, null=status is
                                          VersioningStatus.SUSPENDED)

    async def _add_marker(self, bucket: str, key: str, *, null: bool) -> DeleteOutcome:
        await self._backend.head_bucket(bucket)
        current = await self._head_current(bucket, key)
        if current is not None:
            if not (null and current_version(current).null):
                await self._archive(bucket, current)
            await self._backend.delete_object(bucket, key)
        marker = as_record(Version(key, self._ids.new(), null, True, key))
        await self._backend.put_object(bucket, marker.stored_key, body_of(b""),
                                       meta=stamp(ObjectMeta(), marker.order, null=null))
        if null:
            await self._drop_null_records(bucket, key, keep=marker.stored_key)
        return DeleteOutcome(marker.version_id, True)

    async def _remove(self, bucket: str, version: Version) -> None:
        await self._backend.delete_object(bucket, version.stored_key)
        if version.is_current_object or await self._head_current(bucket, version.key) is None:
            await self._promote(bucket, version.key)

    async def _promote(self, bucket: str, key: str) -> None:
        """Make the newest record the current object if it holds data."""
        records = await self.records(bucket, key)
        if not records or records[0][1].marker:
            return
        info, version = records[0]
        await self._copy(bucket, version.stored_key, key,
                         stamp(info.meta, version.order, null=version.null,
                               etag=version_etag(info)))
        for _, other in records:
            if other.order == version.order:
                await self._backend.delete_object(bucket, other.stored_key)

    async def _archive(self, bucket: str, current: ObjectInfo) -> None:
        version = as_record(current_version(current))
        await self._copy(bucket, current.key, version.stored_key,
                         stamp(current.meta, version.order, null=version.null,
                               etag=version_etag(current)))

    async def _drop_null_records(self, bucket: str, key: str, *, keep: str | None) -> None:
        for _, version in await self.records(bucket, key):
            if version.null and version.stored_key != keep:
                await self._backend.delete_object(bucket, version.stored_key)

    async def _copy(self, bucket: str, src_key: str, dst_key: str, meta: ObjectMeta) -> None:
        if isinstance(self._backend, CopyingBackend):
            await self._backend.copy_object(bucket, src_key, bucket, dst_key, meta=meta)
            return
        async with await self._backend.get_object(bucket, src_key) as stream:
            await self._backend.put_object(bucket, dst_key, bare(aiter(stream)), meta=meta)

    async def replace_meta(self, bucket: str, key: str, version_id: str | None,
                           change: Callable[[ObjectMeta], ObjectMeta]) -> ObjectInfo:
        """Change the metadata (tags) of one version, keeping its stamp."""
        self._check_owner(bucket, key)
        async with self._locks.hold((bucket, key)):
            if not await self._versioned(bucket):
                info = await self.head(bucket, key, version_id=version_id)
                return self.view(await self._backend.replace_metadata(
                    bucket, key, change(info.meta)), None)
            version = await self.locate(bucket, key, version_id)
            info = await self._backend.head_object(bucket, version.stored_key)
            new = _merge_stamp(change(unstamped(info.meta)), info.meta)
            updated = await self._backend.replace_metadata(bucket, version.stored_key, new)
            return client_view(updated, version, versioned=True)

    # -- buckets -----------------------------------------------------------------------

    async def before_bucket_delete(self, bucket: str) -> bool:
        """Drop the bucket's versioning status if nothing else is left in it; whether it
        was (False: the backend refuses with BucketNotEmpty)."""
        self._states.forget(bucket)
        for prefix in ("", RECORDS):
            async for info in self._backend.iter_objects(bucket, prefix=prefix):
                if not info.key.startswith(CONFIG_PREFIX):  # settings go with the bucket
                    return False
        await self._states.remove(bucket)
        return True

    def forget(self, bucket: str) -> None:
        self._states.forget(bucket)

    def created(self, bucket: str) -> None:
        """``bucket`` was just created here: unversioned, as every new bucket."""
        self._states.created(bucket)


def _with_meta(info: ObjectInfo, meta: ObjectMeta) -> ObjectInfo:
    return replace(info, meta=meta)


def _merge_stamp(meta: ObjectMeta, stamped: ObjectMeta) -> ObjectMeta:
    """``meta`` with the reserved entries of ``stamped``."""
    user = dict(unstamped(meta).user)
    user.update({k: v for k, v in stamped.user.items() if k in (STAMP, ETAG)})
    return replace(meta, user=user)
