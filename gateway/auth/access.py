"""The one authorization point: may this user (or an anonymous caller) do this operation
on this bucket or object? Called once per request by the S3 endpoint after
authentication; the admin never gets here (the endpoint lets it through at once).

Order, as S3's: an explicit Deny of the bucket policy refuses; an Allow of the policy, the
ownership of the bucket (or object), or an ACL grant allows; anything else is refused
with 403 AccessDenied. Buckets are read from their cached configuration documents; an
object's ACL (its metadata) is read only for object-level reads in a bucket whose ACLs
are enabled.
"""

from __future__ import annotations

import asyncio
import urllib.parse
import weakref
from collections.abc import Callable, Mapping

from backends.core.errors import NoSuchKey, NoSuchVersion, StorageError
from gateway.auth import bucket_access
from gateway.auth.acl import ACL_METADATA, Acl, private
from gateway.auth.actions import ACTIONS, Permission, Scope
from gateway.auth.bucket_access import DOCUMENT, S3_DEFAULTS, BucketAccess, NewBucketDefaults
from gateway.auth.owners import ListingOwners
from gateway.auth.policy import BucketPolicy, Decision, PolicyRequest, bucket_policy
from gateway.auth.users import User, UserDirectory
from gateway.protocol.errors import AccessDenied, VersionIsDeleteMarker
from gateway.service.bucket_config import BucketConfigs
from gateway.service.objects import ObjectService

_COPIES = frozenset({"CopyObject", "UploadPartCopy"})


class AccessControl:
    """Owners, ACLs and policies of the buckets ``service`` serves, for ``users``."""

    def __init__(self, service: ObjectService, users: UserDirectory, *,
                 new_buckets: NewBucketDefaults = S3_DEFAULTS) -> None:
        self._service = service
        self._users = users
        #: what a new bucket gets when its CreateBucket does not choose
        self.new_buckets = new_buckets
        # One lock per bucket whose access document is being changed (dropped when unused).
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = \
            weakref.WeakValueDictionary()

    @property
    def configs(self) -> BucketConfigs:
        return self._service.configs

    @property
    def admin_id(self) -> str:
        return self._users.admin.canonical_id

    def known(self, canonical_id: str) -> bool:
        """Whether a user has this canonical id."""
        return any(u.canonical_id == canonical_id for u in self._users.users())

    def name_of(self, canonical_id: str) -> str | None:
        return next((u.name for u in self._users.users() if u.canonical_id == canonical_id),
                    None)

    async def bucket(self, bucket: str) -> BucketAccess:
        """The bucket's owner, ACL and settings; NoSuchBucket if there is none."""
        return await bucket_access.load(self.configs, bucket, self.admin_id)

    async def change_bucket(self, bucket: str,
                            change: Callable[[BucketAccess], BucketAccess]) -> BucketAccess:
        """Read the bucket's settings, apply ``change`` (which may refuse by raising) and
        write the result, one change of a bucket at a time in this process."""
        lock = self._locks.get(bucket)
        if lock is None:
            lock = self._locks[bucket] = asyncio.Lock()
        async with lock:
            changed = change(await self.bucket(bucket))
            await self._service.put_bucket_config(bucket, DOCUMENT, changed.to_json())
            return changed

    async def listing_owners(self, bucket: str,
                             settings: BucketAccess | None = None) -> ListingOwners:
        """The owners of the objects one listing of ``bucket`` shows."""
        return ListingOwners(settings or await self.bucket(bucket), self.name_of)

    async def object_acl(self, bucket: str, key: str, version_id: str | None,
                         settings: BucketAccess) -> Acl:
        """The owner and ACL of an object (the bucket owner's private ACL when ACLs are
        disabled or the object has none); NoSuchKey, NoSuchVersion."""
        info = await self._service.head_object(bucket, key, version_id=version_id)
        raw = info.meta.user.get(ACL_METADATA)
        if raw is None or not settings.acls_enabled:
            return private(settings.owner)
        try:
            return Acl.decode(raw)
        except (ValueError, KeyError, TypeError):
            return private(settings.owner)

    async def owned(self, user: User, buckets: list[str]) -> set[str]:
        """The buckets among ``buckets`` that ``user`` owns."""
        if user.admin:
            return set(buckets)
        out = set()
        for name in buckets:
            try:
                if (await self.bucket(name)).owner == user.canonical_id:
                    out.add(name)
            except StorageError:  # deleted meanwhile, unreadable settings
                continue
        return out

    async def authorize(self, user: User | None, operation: str, bucket: str, key: str, *,
                        query: Mapping[str, str], headers: Mapping[str, str],
                        source_ip: str, secure: bool) -> BucketAccess | None:
        """Return (the bucket's settings, when read) if the caller may do ``operation``;
        raise AccessDenied if not (NoSuchBucket for a bucket that does not exist)."""
        action = ACTIONS[operation]
        if action.scope is Scope.SERVICE:
            if user is None and operation != "PreflightRequest":
                raise AccessDenied()
            return None
        settings = await self.bucket(bucket)
        where = (source_ip, secure)
        if operation == "DeleteObjects":  # decided key by key (:meth:`allows`)
            if user is None and not await self._anonymous_may_delete(bucket, settings):
                raise AccessDenied()  # before the request's content is looked at
            return settings
        await self._decide(user, operation, bucket, key, query, settings, where)
        if operation in _COPIES:
            source = _copy_source(headers)
            if source is not None:
                src_bucket, src_key, src_version = source
                await self._decide(user, "GetObject", src_bucket, src_key,
                                   {"versionId": src_version} if src_version else {},
                                   await self.bucket(src_bucket), where)
        return settings

    async def check_expected_owners(self, operation: str, bucket: str,
                                    headers: Mapping[str, str],
                                    settings: BucketAccess | None) -> None:
        """``x-amz-expected-bucket-owner`` (every bucket and object operation) and
        ``x-amz-source-expected-bucket-owner`` (CopyObject, UploadPartCopy): AccessDenied
        unless the bucket's owner has that canonical id, for every caller, the admin
        included. ``settings``: the bucket's, when already read."""
        expected = headers.get("x-amz-expected-bucket-owner")
        if expected is not None and bucket and ACTIONS[operation].scope is not Scope.SERVICE:
            owner = (settings or await self.bucket(bucket)).owner
            if expected.strip() != owner:
                raise AccessDenied()
        expected = headers.get("x-amz-source-expected-bucket-owner")
        source = _copy_source(headers) if operation in _COPIES else None
        if expected is not None and source is not None and \
                expected.strip() != (await self.bucket(source[0])).owner:
            raise AccessDenied()

    async def _anonymous_may_delete(self, bucket: str, settings: BucketAccess) -> bool:
        """Whether an anonymous DeleteObjects could delete anything: a bucket policy
        (decided key by key) or a public WRITE grant the block does not ignore."""
        if await bucket_policy(self.configs, bucket) is not None:
            return True
        permission = ACTIONS["DeleteObject"].permission
        return permission is not None and settings.acl.allows(
            None, permission, ignore_public=settings.block.ignore_public_acls)

    async def allows(self, user: User | None, operation: str, bucket: str, key: str, *,
                     version_id: str | None, settings: BucketAccess, source_ip: str,
                     secure: bool) -> bool:
        """Whether the caller may do ``operation`` on one key (DeleteObjects asks this for
        every key it names, as S3 does)."""
        try:
            await self._decide(user, operation, bucket, key,
                               {"versionId": version_id} if version_id else {}, settings,
                               (source_ip, secure))
        except AccessDenied:
            return False
        return True

    async def _decide(self, user: User | None, operation: str, bucket: str, key: str,
                      query: Mapping[str, str], settings: BucketAccess,
                      where: tuple[str, bool]) -> None:
        action = ACTIONS[operation]
        policy = await bucket_policy(self.configs, bucket)
        if policy is not None:
            decision = policy.evaluate(PolicyRequest(
                user=user, action=action.action_for(query), bucket=bucket,
                key=key if key else None, source_ip=where[0], secure_transport=where[1],
                prefix=query.get("prefix")))
            if decision is Decision.DENY:
                raise AccessDenied()
            if decision is Decision.ALLOW and self._policy_counts(user, policy, settings):
                return
        uid = None if user is None else user.canonical_id
        block = settings.block
        if action.scope is Scope.BUCKET or not key:
            if uid == settings.owner:
                return
            if action.permission is not None and settings.acl.allows(
                    uid, action.permission, ignore_public=block.ignore_public_acls):
                return
            raise AccessDenied()
        if not settings.acls_enabled:  # the bucket owner owns every object
            if uid == settings.owner:
                return
            raise AccessDenied()
        try:
            acl = await self.object_acl(bucket, key, query.get("versionId") or None, settings)
        except (NoSuchKey, NoSuchVersion, VersionIsDeleteMarker):
            # Whoever may list the bucket learns that the key is missing; others do not.
            if uid == settings.owner or settings.acl.allows(
                    uid, Permission.READ, ignore_public=block.ignore_public_acls):
                raise
            raise AccessDenied() from None
        if uid == acl.owner:
            return
        if action.permission is not None and acl.allows(
                uid, action.permission, ignore_public=block.ignore_public_acls):
            return
        raise AccessDenied()

    @staticmethod
    def _policy_counts(user: User | None, policy: BucketPolicy,
                       settings: BucketAccess) -> bool:
        """RestrictPublicBuckets: a public policy allows only users of this gateway."""
        return not (user is None and settings.block.restrict_public_buckets
                    and policy.is_public)


def request_origin(scope: Mapping[str, object]) -> tuple[str, bool]:
    """(source address, came over TLS) of an ASGI request, for policy conditions."""
    client = scope.get("client")
    address = client[0] if isinstance(client, (tuple, list)) and client else ""
    return str(address), scope.get("scheme") == "https"


def _copy_source(headers: Mapping[str, str]) -> tuple[str, str, str | None] | None:
    """(bucket, key, version id) of ``x-amz-copy-source``; None when it is malformed (the
    handler answers that)."""
    raw = headers.get("x-amz-copy-source", "")
    path, _, query = raw.partition("?")
    bucket, _, key = urllib.parse.unquote(path).lstrip("/").partition("/")
    if not bucket or not key:
        return None
    version = urllib.parse.parse_qs(query).get("versionId")
    return bucket, key, version[0] if version else None
