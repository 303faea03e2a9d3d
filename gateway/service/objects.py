"""ObjectService: the gateway core between the S3 protocol and the storage stack.

It validates names, evaluates conditions against the object actually opened, copies,
lists, and exposes multipart uploads; it knows nothing of HTTP and nothing of files.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace

from backends.core.base import (
    Backend,
    BucketInfo,
    CompletedPart,
    CopyingBackend,
    DescribedBody,
    MultipartBackend,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    PartCopyingBackend,
    PartInfo,
    RangedWriteBackend,
    RangeRequest,
    UploadInfo,
    bare,
)
from backends.core.errors import (
    BucketNotEmpty,
    ConditionalRequestConflict,
    InvalidBucketName,
    InvalidKey,
    InvalidRange,
    InvalidRequestForObject,
    NoSuchKey,
    NoSuchUpload,
    NoSuchVersion,
    NotImplementedByBackend,
    StorageError,
)
from backends.core.keys import INTERNAL_PREFIX as INTERNAL
from backends.core.keys import check_key as backends_check_key
from backends.core.upload_checksums import (
    UploadChecksum,
    check_object_checksum,
    check_requested,
    declare,
    object_checksum,
    upload_checksum,
)
from backends.multipart import PART_LAYOUT, check_completion, completed_by, last_of_repeats
from gateway.cache.keyguard import WriteGuard
from gateway.cluster.keyops import DeleteAnswer, KeyOwners
from gateway.lifecycle import rules as lifecycle
from gateway.protocol.checksumming import ChecksummingBody
from gateway.protocol.conditions import Conditions
from gateway.protocol.cors import CorsRule, rules_from_json, rules_to_json
from gateway.protocol.listing import (
    AFTER_ALL,
    ListPage,
    UploadPage,
    closing,
    list_page,
    upload_page,
)
from gateway.protocol.parts import part_range
from gateway.service.bucket_config import BucketConfigs
from gateway.versioning import VersionedObjects, VersioningStatus
from gateway.versioning.listing import VersionPage, version_page
from gateway.versioning.objects import DeleteOutcome
from gateway.versioning.records import (
    Version,
    current_version,
    is_internal,
    unstamped,
)

NO_CONDITIONS = Conditions()
#: How long a retried CompleteMultipartUpload is answered with the first one's result.
COMPLETED_UPLOAD_MEMORY = 24 * 3600.0
_PART_READ_ATTEMPTS = 3
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def check_bucket_name(name: str) -> None:
    """S3's bucket naming rules; InvalidBucketName with the rule that failed."""
    if not _BUCKET_RE.match(name):
        raise InvalidBucketName("Bucket names must be 3-63 characters of lowercase letters, "
                                "digits, dots and hyphens, starting and ending with a letter "
                                "or digit.", resource=name)
    if ".." in name or ".-" in name or "-." in name:
        raise InvalidBucketName("Bucket names must not contain '..', '.-' or '-.'.",
                                resource=name)
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        pass
    else:
        raise InvalidBucketName("Bucket names must not be formatted as an IP address.",
                                resource=name)
    if name.startswith(("xn--", "sthree-")) or name.endswith(("-s3alias", "--ol-s3")):
        raise InvalidBucketName("Bucket names must not use a reserved prefix or suffix.",
                                resource=name)


def check_key(key: str) -> None:
    """S3's key rules plus the control characters an XML listing could not carry."""
    backends_check_key(key)
    if any(ord(c) < 32 and c not in "\t\n\r" for c in key) or "\ufffe" in key:
        raise InvalidKey("Object keys must not contain control characters.", resource=key)
    if is_internal(key):
        raise InvalidKey("Object keys must not start with U+007F (reserved).", resource=key)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    key: str
    version_id: str | None = None  # as asked for
    outcome: DeleteOutcome | None = None
    error: StorageError | None = None


def _check_copy_range(byte_range: RangeRequest | None, size: int) -> None:
    """``x-amz-copy-source-range`` must lie within the source (S3: InvalidRange), never
    be cut short."""
    if byte_range is None:
        return
    byte_range.resolve(size)
    if byte_range.last is not None and byte_range.last >= size:
        raise InvalidRange(size)


@dataclass(frozen=True, slots=True)
class CopySource:
    bucket: str
    key: str
    conditions: Conditions = NO_CONDITIONS
    byte_range: RangeRequest | None = None
    version_id: str | None = None


@dataclass(frozen=True, slots=True)
class CopyResult:
    info: ObjectInfo
    source_version_id: str | None  # the source version copied, in a versioned bucket


class ObjectService:
    """S3 semantics over any :class:`Backend` (which may be a cache tier wrapping one)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        # In a cluster, each key's writes run on its owner (docs/cluster.md).
        self._owners = backend if isinstance(backend, KeyOwners) else None
        owners = self._owners
        self._versions = VersionedObjects(backend, owns=None if owners is None else
                                          lambda b, k: owners.key_owner(b, k) is None)
        if owners is not None:
            owners.serve_key_operations(self)
        self._configs = BucketConfigs(backend)
        self._guard = WriteGuard()  # lifecycle expiration never races a write
        # Other gateway processes (cluster members, workers) cache bucket settings too.
        listen = getattr(backend, "on_settings_changed", None)
        if listen is not None:
            listen(self._versions.forget)
            listen(self._configs.forget)

    async def _settings_changed(self, bucket: str) -> None:
        """Tell the other gateway processes, if any, to drop their copy of ``bucket``'s
        settings."""
        announce = getattr(self._backend, "settings_changed", None)
        if announce is not None:
            await announce(bucket)

    @property
    def backend(self) -> Backend:
        return self._backend

    def _multipart(self) -> MultipartBackend:
        if not isinstance(self._backend, MultipartBackend):
            raise NotImplementedByBackend("This backend does not support multipart uploads.")
        return self._backend

    # -- buckets -----------------------------------------------------------------------

    async def list_buckets(self) -> list[BucketInfo]:
        return sorted(await self._backend.list_buckets(), key=lambda b: b.name)

    async def create_bucket(self, bucket: str) -> BucketInfo:
        check_bucket_name(bucket)
        self._versions.forget(bucket)
        self._configs.forget(bucket)
        info = await self._backend.create_bucket(bucket)
        # A new bucket has no settings yet: known without asking the store, so its
        # first writes are absorbed by the cache even while the store cannot be reached.
        self._versions.created(bucket)
        self._configs.created(bucket)
        return info

    async def head_bucket(self, bucket: str) -> BucketInfo:
        return await self._backend.head_bucket(bucket)

    async def delete_bucket(self, bucket: str) -> None:
        status = await self._versions.status(bucket)
        configs = {}
        if await self._versions.before_bucket_delete(bucket):
            configs = await self._configs.take_all(bucket)
        try:
            await self._backend.delete_bucket(bucket)
        except BucketNotEmpty:  # a write raced the delete: the bucket keeps its settings
            if status is not VersioningStatus.UNVERSIONED:
                await self._versions.set_status(bucket, status)
            await self._configs.restore(bucket, configs)
            raise
        self._configs.forget(bucket)

    async def put_bucket_cors(self, bucket: str, rules: Sequence[CorsRule]) -> None:
        await self._backend.head_bucket(bucket)
        await self._configs.put(bucket, "cors", rules_to_json(rules))
        await self._settings_changed(bucket)

    async def get_bucket_cors(self, bucket: str) -> list[CorsRule] | None:
        """The bucket's CORS rules, None if it has no CORS configuration."""
        await self._backend.head_bucket(bucket)
        return await self.cors_rules(bucket)

    async def cors_rules(self, bucket: str) -> list[CorsRule] | None:
        """The CORS rules (cached briefly), without checking that the bucket exists."""
        doc = await self._configs.get(bucket, "cors")
        return None if doc is None else rules_from_json(doc)

    async def delete_bucket_cors(self, bucket: str) -> None:
        await self._configs.delete(bucket, "cors")
        await self._settings_changed(bucket)

    async def put_bucket_tagging(self, bucket: str, tags: dict[str, str]) -> None:
        await self._backend.head_bucket(bucket)
        await self._configs.put(bucket, "tagging", tags)
        await self._settings_changed(bucket)

    async def get_bucket_tagging(self, bucket: str) -> dict[str, str] | None:
        """The bucket's tags, None if it has no tag set."""
        await self._backend.head_bucket(bucket)
        doc = await self._configs.get(bucket, "tagging")
        return None if doc is None else {str(k): str(v) for k, v in doc.items()}

    async def delete_bucket_tagging(self, bucket: str) -> None:
        await self._configs.delete(bucket, "tagging")
        await self._settings_changed(bucket)

    async def put_bucket_lifecycle(self, bucket: str, rules: Sequence[lifecycle.Rule]) -> None:
        await self._backend.head_bucket(bucket)
        await self._configs.put(bucket, "lifecycle", lifecycle.rules_to_json(rules))
        await self._settings_changed(bucket)

    async def get_bucket_lifecycle(self, bucket: str) -> list[lifecycle.Rule] | None:
        """The bucket's lifecycle rules, None if it has no lifecycle configuration."""
        await self._backend.head_bucket(bucket)
        return await self.lifecycle_rules(bucket)

    async def lifecycle_rules(self, bucket: str) -> list[lifecycle.Rule] | None:
        """The lifecycle rules (cached briefly), without checking that the bucket exists."""
        doc = await self._configs.get(bucket, "lifecycle")
        return None if doc is None else lifecycle.rules_from_json(doc)

    async def delete_bucket_lifecycle(self, bucket: str) -> None:
        await self._configs.delete(bucket, "lifecycle")
        await self._settings_changed(bucket)

    @property
    def configs(self) -> BucketConfigs:
        """The buckets' configuration documents (read by the authorization point)."""
        return self._configs

    async def put_bucket_policy(self, bucket: str, text: str) -> None:
        """Store a bucket policy (already validated) as the text that was sent."""
        await self._backend.head_bucket(bucket)
        await self._configs.put(bucket, "policy", text)
        await self._settings_changed(bucket)

    async def get_bucket_policy(self, bucket: str) -> str | None:
        """The bucket's policy text, None if it has no policy."""
        await self._backend.head_bucket(bucket)
        doc = await self._configs.get(bucket, "policy")
        return None if doc is None else str(doc)

    async def delete_bucket_policy(self, bucket: str) -> None:
        await self._configs.delete(bucket, "policy")
        await self._settings_changed(bucket)

    async def put_bucket_config(self, bucket: str, name: str, doc: object) -> None:
        """Store the configuration document ``name`` of an existing bucket and tell the
        other gateway processes (the bucket's owner and access settings)."""
        await self._configs.put(bucket, name, doc)
        await self._settings_changed(bucket)

    async def get_bucket_versioning(self, bucket: str) -> VersioningStatus:
        await self._backend.head_bucket(bucket)
        return await self._versions.status(bucket)

    async def put_bucket_versioning(self, bucket: str, status: VersioningStatus) -> None:
        await self._versions.set_status(bucket, status)
        await self._settings_changed(bucket)

    # -- objects -----------------------------------------------------------------------

    async def put_object(self, bucket: str, key: str, body: DescribedBody, *,
                         meta: ObjectMeta, content_md5: bytes | None = None,
                         if_match: str | None = None,
                         if_none_match: str | None = None) -> ObjectInfo:
        check_key(key)

        async def writer(stamped: ObjectMeta) -> ObjectInfo:
            return await self._backend.put_object(bucket, key, body, meta=stamped,
                                                  content_md5=content_md5, if_match=if_match,
                                                  if_none_match=if_none_match)
        async with self._guard.writing((bucket, key)):
            return await self._versions.write(bucket, key, meta, writer)

    async def append_object(self, bucket: str, key: str, offset: int,
                            body: DescribedBody, *, meta: ObjectMeta,
                            if_match: str | None = None,
                            reserved: Mapping[str, str] | None = None) -> ObjectInfo:
        """Write ``body`` at ``offset``, which must be the object's size (S3's
        ``x-amz-write-offset-bytes``; 0 creates the object). ``reserved`` metadata
        entries (the owner and ACL) are recorded when the append creates the object and
        are not client metadata; an existing object keeps its own."""
        check_key(key)
        if not isinstance(self._backend, RangedWriteBackend):
            raise NotImplementedByBackend("Appends need a backend with ranged writes "
                                          "(blobseer_like without a cache tier).")
        if await self._versions.status(bucket) is not VersioningStatus.UNVERSIONED:
            raise NotImplementedByBackend("Appends are not supported in buckets with "
                                          "versioning.")
        try:
            await self._backend.head_object(bucket, key)
            exists = True
        except NoSuchKey:
            exists = False
        if exists and meta.user:
            raise InvalidRequestForObject("Cannot specify both a write offset value and "
                                          "user-defined object metadata for existing "
                                          "objects.")
        if reserved and not exists:
            meta = replace(meta, user={**meta.user, **reserved})
        async with self._guard.writing((bucket, key)):
            info = await self._backend.write_at(bucket, key, offset, body,
                                                meta=None if exists else unstamped(meta),
                                                if_match=if_match, append_only=True)
        return self._versions.view(info, None)

    async def get_object(self, bucket: str, key: str, *, byte_range: RangeRequest | None,
                         conditions: Conditions = NO_CONDITIONS,
                         version_id: str | None = None,
                         part_number: int | None = None) -> ObjectStream:
        """Open an object (or its part ``part_number``, see :mod:`gateway.protocol.parts`);
        conditions are checked on the very version opened."""
        check_key(key)
        if part_number is not None:
            return await self._get_part(bucket, key, part_number, conditions, version_id)
        if conditions:
            # Preconditions are evaluated before the range (412/304 win over 416).
            conditions.check_read(await self._versions.head(bucket, key,
                                                            version_id=version_id))
        stream = await self._versions.get(bucket, key, version_id=version_id,
                                          byte_range=byte_range)
        try:
            conditions.check_read(stream.info)
        except BaseException:
            await stream.aclose()
            raise
        return stream

    async def _get_part(self, bucket: str, key: str, part_number: int,
                        conditions: Conditions, version_id: str | None) -> ObjectStream:
        for _ in range(_PART_READ_ATTEMPTS):
            info = await self._versions.head(bucket, key, version_id=version_id)
            conditions.check_read(info)
            part = part_range(info, part_number)
            wanted = None if part is None else RangeRequest(first=part.start, last=part.end)
            stream = await self._versions.get(bucket, key, version_id=version_id,
                                              byte_range=wanted)
            if stream.info.etag == info.etag:
                return stream
            await stream.aclose()  # overwritten in between: the layout may differ
        raise ConditionalRequestConflict("The object changed while its part was read.")

    async def head_object(self, bucket: str, key: str, *,
                          conditions: Conditions = NO_CONDITIONS,
                          version_id: str | None = None) -> ObjectInfo:
        check_key(key)
        info = await self._versions.head(bucket, key, version_id=version_id)
        conditions.check_read(info)
        return info

    async def delete_object(self, bucket: str, key: str, *,
                            version_id: str | None = None) -> DeleteOutcome:
        check_key(key)
        return await self._versions.delete(bucket, key, version_id=version_id)

    async def expire_object(self, bucket: str, key: str, *, etag: str, last_modified: float,
                            version_id: str | None) -> DeleteOutcome | None:
        """Lifecycle expiration of the current object of ``key``: deleted as a client's
        DELETE would (a delete marker in a versioned bucket), but only if it is still the
        version described (ETag, time, version id) and no write of the key is under way;
        None when nothing was deleted."""
        check_key(key)
        async with self._guard.expiring((bucket, key)) as alone:
            if not alone:
                return None
            try:
                info = await self._versions.head(bucket, key)
            except (NoSuchKey, NoSuchVersion):
                return None
            if info.etag != etag or info.version_id != version_id or \
                    abs(info.last_modified - last_modified) >= 1.0:
                return None
            return await self._versions.delete(bucket, key)

    async def delete_objects(self, bucket: str, objects: Sequence[tuple[str, str | None]]
                             ) -> list[DeleteResult]:
        """Delete (key, version id or None) pairs, each on its own and on its key's owner:
        in a cluster, each other member deletes its keys (one request per member) while
        this process deletes its own; results come back in request order."""
        await self._backend.head_bucket(bucket)
        owners = self._owners
        groups: dict[int | None, list[int]] = {}
        for index, (key, _) in enumerate(objects):
            groups.setdefault(None if owners is None else owners.key_owner(bucket, key),
                              []).append(index)
        answers: list[DeleteAnswer | None] = [None] * len(objects)

        async def here(indexes: list[int]) -> None:
            for index in indexes:
                key, version_id = objects[index]
                try:
                    answers[index] = await self.delete_object(bucket, key,
                                                              version_id=version_id)
                except StorageError as exc:
                    answers[index] = exc

        async def there(owner: int, indexes: list[int]) -> None:
            assert owners is not None
            got: Sequence[DeleteAnswer]
            try:
                got = await owners.delete_objects_at(owner, bucket,
                                                     [objects[i] for i in indexes])
            except StorageError as exc:  # the member is unavailable: so are its keys
                got = [exc] * len(indexes)
            for index, answer in zip(indexes, got, strict=True):
                answers[index] = answer

        done = await asyncio.gather(*(here(indexes) if owner is None else
                                      there(owner, indexes)
                                      for owner, indexes in groups.items()),
                                    return_exceptions=True)
        for failure in done:
            if isinstance(failure, BaseException):
                raise failure
        results = []
        for (key, version_id), answer in zip(objects, answers, strict=True):
            if isinstance(answer, StorageError):
                results.append(DeleteResult(key, version_id, error=answer))
            else:
                results.append(DeleteResult(key, version_id, answer))
        return results

    async def _source(self, source: CopySource) -> tuple[str, Version | None]:
        """The stored key and version (None in an unversioned bucket) of a copy source."""
        version = await self._versions.source(source.bucket, source.key, source.version_id)
        return (source.key if version is None else version.stored_key), version

    async def copy_object(self, source: CopySource, bucket: str, key: str, *,
                          meta: ObjectMeta | None, tags: dict[str, str] | None = None,
                          user_changes: Mapping[str, str | None] | None = None
                          ) -> CopyResult:
        """Copy ``source``; ``meta`` None keeps the source metadata (directive COPY).

        ``tags`` None keeps the source tags (tagging directive COPY); ``user_changes``
        sets (or, with None, removes) entries of the copy's user metadata whatever the
        directive (the owner and ACL of the copy).
        """
        check_key(key)
        stored, version = await self._source(source)
        src = self._versions.view(await self._backend.head_object(source.bucket, stored),
                                  version)
        source.conditions.check_copy_source(src)
        new_meta = meta if meta is not None else src.meta
        if meta is not None and PART_LAYOUT in src.meta.user:  # the copy keeps the ETag
            new_meta = replace(meta, user={**meta.user,
                                           PART_LAYOUT: src.meta.user[PART_LAYOUT]})
        new_meta = replace(new_meta, tags=dict(src.meta.tags) if tags is None else tags,
                           checksum=src.meta.checksum if meta is None else new_meta.checksum)
        if user_changes:
            user = {**new_meta.user, **{k: v for k, v in user_changes.items() if v is not None}}
            for name in (k for k, v in user_changes.items() if v is None):
                user.pop(name, None)
            new_meta = replace(new_meta, user=user)

        async def writer(stamped: ObjectMeta) -> ObjectInfo:
            if isinstance(self._backend, CopyingBackend):
                raw = await self._backend.head_object(source.bucket, stored)
                return await self._backend.copy_object(source.bucket, stored, bucket, key,
                                                       meta=stamped, src_etag=raw.etag)
            async with await self._backend.get_object(source.bucket, stored) as stream:
                return await self._backend.put_object(bucket, key, bare(aiter(stream)),
                                                      meta=stamped)
        async with self._guard.writing((bucket, key)):
            info = await self._versions.write(bucket, key, new_meta, writer)
        return CopyResult(info, None if version is None else version.version_id)

    async def replace_tags(self, bucket: str, key: str, tags: dict[str, str], *,
                           version_id: str | None = None) -> ObjectInfo:
        check_key(key)
        async with self._guard.writing((bucket, key)):
            return await self._versions.replace_meta(bucket, key, version_id,
                                                     lambda meta: replace(meta, tags=tags))

    async def change_user_metadata(self, bucket: str, key: str,
                                   changes: Mapping[str, str], *,
                                   version_id: str | None = None) -> ObjectInfo:
        """Set entries of one object version's user metadata (its owner and ACL)."""
        check_key(key)
        async with self._guard.writing((bucket, key)):
            return await self._versions.replace_meta(
                bucket, key, version_id,
                lambda meta: replace(meta, user={**meta.user, **changes}))

    async def list_objects(self, bucket: str, *, prefix: str, delimiter: str, max_keys: int,
                           after: str) -> ListPage:
        await self._backend.head_bucket(bucket)

        def iterate(start_after: str) -> AsyncIterator[ObjectInfo]:
            return self._current_objects(bucket, prefix, start_after)

        return await list_page(iterate, prefix=prefix, delimiter=delimiter, max_keys=max_keys,
                               after=after)

    async def _current_objects(self, bucket: str, prefix: str, start_after: str
                               ) -> AsyncIterator[ObjectInfo]:
        """Current objects as clients see them; internal keys are skipped."""
        while True:
            async with closing(self._backend.iter_objects(
                    bucket, prefix=prefix, start_after=start_after)) as listing:
                async for info in listing:
                    if is_internal(info.key):
                        break
                    yield self._versions.view(info, current_version(info)
                                              if info.meta.user else None)
                else:
                    return
            if start_after >= INTERNAL + AFTER_ALL:
                return
            start_after = INTERNAL + AFTER_ALL

    async def list_object_versions(self, bucket: str, *, prefix: str, delimiter: str,
                                   max_keys: int, key_marker: str,
                                   version_id_marker: str) -> VersionPage:
        return await version_page(self._versions, bucket, prefix=prefix, delimiter=delimiter,
                                  max_keys=max_keys, key_marker=key_marker,
                                  version_id_marker=version_id_marker)

    # -- multipart ---------------------------------------------------------------------

    async def create_multipart_upload(self, bucket: str, key: str, *, meta: ObjectMeta,
                                      checksum: UploadChecksum | None = None) -> UploadInfo:
        """A new upload; ``checksum`` is the algorithm and type its parts and object use."""
        check_key(key)
        await self._backend.head_bucket(bucket)
        return await self._multipart().create_multipart_upload(
            bucket, key, meta=declare(unstamped(meta), checksum))

    async def upload_checksum(self, bucket: str, key: str,
                              upload_id: str) -> UploadChecksum | None:
        """The checksum algorithm and type an upload declared (None: none, or the upload
        is unknown)."""
        async with closing(self._multipart().iter_multipart_uploads(
                bucket, prefix=key)) as uploads:
            async for upload in uploads:
                if upload.upload_id == upload_id and upload.key == key:
                    return upload_checksum(upload.meta)
                if upload.key > key:
                    break
        return None

    async def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int,
                          body: DescribedBody, *,
                          content_md5: bytes | None = None) -> PartInfo:
        return await self._multipart().upload_part(bucket, key, upload_id, part_number, body,
                                                   content_md5=content_md5)

    async def upload_part_copy(self, source: CopySource, bucket: str, key: str,
                               upload_id: str, part_number: int
                               ) -> tuple[PartInfo, str | None]:
        """A part copied from (a range of) ``source``: by the storage stack itself when it
        can (:class:`PartCopyingBackend`), else streamed through here."""
        multipart = self._multipart()
        # Fail on an unknown upload before reading any source bytes.
        await multipart.list_parts(bucket, key, upload_id)
        declared = await self.upload_checksum(bucket, key, upload_id)
        stored, version = await self._source(source)
        source_version = None if version is None else version.version_id
        # A part of an upload with a checksum algorithm gets its checksum computed here.
        if isinstance(self._backend, PartCopyingBackend) and declared is None:
            raw = await self._backend.head_object(source.bucket, stored)
            _check_copy_range(source.byte_range, raw.size)  # InvalidRange first, as S3
            source.conditions.check_copy_source(self._versions.view(raw, version))
            part = await self._backend.upload_part_copy(
                source.bucket, stored, bucket, key, upload_id, part_number,
                byte_range=source.byte_range, src_etag=raw.etag)
            return part, source_version
        async with await self._backend.get_object(source.bucket, stored,
                                                  byte_range=source.byte_range) as stream:
            _check_copy_range(source.byte_range, stream.info.size)
            source.conditions.check_copy_source(self._versions.view(stream.info, version))
            body = bare(aiter(stream)) if declared is None else \
                ChecksummingBody(aiter(stream), declared.algorithm)
            part = await multipart.upload_part(bucket, key, upload_id, part_number, body)
        return part, source_version

    async def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo]:
        return await self._multipart().list_parts(bucket, key, upload_id)

    async def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                        parts: Sequence[CompletedPart], *,
                                        if_match: str | None = None,
                                        if_none_match: str | None = None,
                                        checksum_type: str | None = None,
                                        checksum: tuple[str, str] | None = None
                                        ) -> ObjectInfo:
        """Complete an upload. ``checksum_type`` and ``checksum`` (a full-object checksum
        the client expects) and the part checksums named in ``parts`` are checked against
        the upload's declared checksum before anything is committed."""
        multipart = self._multipart()
        parts = last_of_repeats(parts)
        declared = await self.upload_checksum(bucket, key, upload_id)
        if declared is not None:
            check_object_checksum(declared, None, None, checksum_type)
            chosen = check_completion(parts, await multipart.list_parts(bucket, key, upload_id),
                                      min_part_size=0)
            check_requested(declared, parts, chosen)
            check_object_checksum(declared, object_checksum(declared, chosen), checksum, None)

        async def complete() -> ObjectInfo:
            return await multipart.complete_multipart_upload(
                bucket, key, upload_id, parts, if_match=if_match, if_none_match=if_none_match)
        try:
            async with self._guard.writing((bucket, key)):
                return await self._versions.stamp_completed(bucket, key, complete)
        except NoSuchUpload:
            done = await self._completed(bucket, key, upload_id, parts)
            if done is None:
                raise
            return done

    async def _completed(self, bucket: str, key: str, upload_id: str,
                         parts: Sequence[CompletedPart]) -> ObjectInfo | None:
        """The object an earlier completion of ``upload_id`` with ``parts`` made, if it is
        still the key's current object and was completed less than
        :data:`COMPLETED_UPLOAD_MEMORY` seconds ago: S3 answers a retried completion with
        the result of the first (an SDK retries one whose answer it did not get)."""
        try:
            info = await self._versions.head(bucket, key)
        except (NoSuchKey, NoSuchVersion):
            return None
        if time.time() - info.last_modified > COMPLETED_UPLOAD_MEMORY or \
                not completed_by(info, upload_id, parts):
            return None
        return info

    async def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        await self._multipart().abort_multipart_upload(bucket, key, upload_id)

    async def list_multipart_uploads(self, bucket: str, *, prefix: str, delimiter: str,
                                     max_uploads: int, key_marker: str,
                                     upload_id_marker: str) -> UploadPage:
        await self._backend.head_bucket(bucket)
        uploads = self._multipart().iter_multipart_uploads(bucket, prefix=prefix)
        return await upload_page(uploads, prefix=prefix, delimiter=delimiter,
                                 max_uploads=max_uploads, key_marker=key_marker,
                                 upload_id_marker=upload_id_marker)
