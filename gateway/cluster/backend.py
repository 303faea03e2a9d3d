"""ClusterBackend: the storage stack as seen by a cluster member.

Sits between ObjectService and this node's cache tier (``local``). Storage operations
on a key this node owns go to ``local``; on any other key they go to the key's owner
through the peer protocol (so the source of a copy owned elsewhere is read where its
newest state lives). A key's writes with their versioning logic run on its owner
(KeyOwners): single-key requests are forwarded there, and the gateway core sends each
owner its part of a DeleteObjects (``delete_objects_at``). Listings
merge the shared backend (through ``local``) with every member's unflushed records.
Bucket configuration (internal keys under ``CONFIG_PREFIX``, such as the
versioning status) is read from the shared backend while its owner is down, so a bucket
stays usable whichever members are down.

A key is served here only once the membership lets this member serve it
(:meth:`Membership.admit`: its lease is valid and the key's hand-over has ended); its
writes run under :class:`~gateway.cache.keyguard.WriteGuard` so that a hand-over sees
their result, and are copied to the key's mirrors before they are acknowledged.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

from backends.core.base import (
    Backend,
    BucketInfo,
    CompletedPart,
    CopyingBackend,
    DescribedBody,
    ObjectInfo,
    ObjectMeta,
    ObjectStream,
    RangeRequest,
    UploadInfo,
    bare,
)
from backends.core.delegating import DelegatingCopying, DelegatingMultipart
from backends.core.errors import (
    BucketNotEmpty,
    PreconditionFailed,
    ServiceUnavailable,
    SlowDown,
)
from backends.core.internal_keys import CONFIG_PREFIX
from gateway.cache.cluster_view import ClusterView
from gateway.cache.keyguard import WriteGuard
from gateway.cache.listing import merge_sorted
from gateway.cache.tier import CacheTier
from gateway.cluster.errors import MemberUnavailable, ViewChanged
from gateway.cluster.keyops import DeleteAnswer, DeleteItem, KeyOperations
from gateway.cluster.remote import Overlay, PeerClient, Peers, UploadsSnapshot
from gateway.cluster.replication import Replication
from gateway.cluster.ring import routing_key
from gateway.cluster.view import Membership
from gateway.protocol.listing import closing

log = logging.getLogger("squall.cluster")
T = TypeVar("T")
#: listings taken again when the view changes under them, at most
LISTING_ATTEMPTS = 5
RETRY_AFTER_S = 1


async def gather_all(calls: Sequence[Awaitable[T]]) -> list[T]:
    """Run ``calls`` at once; if any fails, raise the first failure (after all ended)."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


class ClusterBackend(DelegatingMultipart, DelegatingCopying):
    """Backend, MultipartBackend and CopyingBackend over ``local`` and the peers (what
    needs no peer is forwarded to ``local`` unchanged)."""

    def __init__(self, local: Backend, membership: Membership, peers: Peers, *,
                 cache: ClusterView | None = None,
                 replication: Replication | None = None,
                 guard: WriteGuard | None = None) -> None:
        super().__init__(local)
        # mirrored write-back: copies of this node's writes on the next members
        self._replication = replication
        self._cache = cache
        self._membership = membership
        self._peers = peers
        self._guard = guard or WriteGuard()
        self._known_buckets: set[str] = set()
        self._key_operations: KeyOperations | None = None
        self._settings_listeners: list[Callable[[str], None]] = []
        # Peers' unflushed records fetched by the listing running in a task, reused when
        # that listing restarts past a common prefix (see iter_objects).
        self._snapshots: weakref.WeakKeyDictionary[
            asyncio.Task[object], dict[tuple[str, str], tuple[str, Overlay]]] = \
            weakref.WeakKeyDictionary()

    @property
    def local(self) -> Backend:
        return self._inner

    def owner_of(self, bucket: str, key: str) -> PeerClient | None:
        """The peer owning ``key``, None if this node does."""
        owner = self.key_owner(bucket, key)
        return None if owner is None else self._peers.get(owner)

    # -- key operations on their owner (KeyOwners) -------------------------------------
    def key_owner(self, bucket: str, key: str) -> str | None:
        """The member owning ``key``, None if this node does."""
        view = self._membership.view
        owner = view.owner(bucket, key)
        if owner is None:
            raise ServiceUnavailable(f"no cluster member runs the worker {bucket}/{key} "
                                     "belongs to")
        return None if owner == view.me else owner

    async def delete_objects_at(self, owner: str, bucket: str,
                                items: Sequence[DeleteItem]) -> list[DeleteAnswer]:
        self._wrote_remotely()
        return await self._peers.get(owner).delete_objects(bucket, items)

    def serve_key_operations(self, operations: KeyOperations) -> None:
        self._key_operations = operations

    @property
    def key_operations(self) -> KeyOperations | None:
        """What runs the other members' requests for this node's keys (None: not yet)."""
        return self._key_operations

    def on_settings_changed(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(bucket)`` when another member changed a bucket's settings
        (versioning status, CORS rules, tags): it drops what it cached of them."""
        self._settings_listeners.append(listener)

    def heard_settings_changed(self, bucket: str) -> None:
        for listener in self._settings_listeners:
            listener(bucket)

    async def settings_changed(self, bucket: str) -> None:
        """This member changed ``bucket``'s settings: every member drops its cached copy
        before the change is acknowledged (a member that cannot be told sees it when its
        copy expires, within seconds)."""
        peers = self._peers.others()
        results = await asyncio.gather(*(p.settings_changed(bucket) for p in peers),
                                       return_exceptions=True)
        for peer, result in zip(peers, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("cluster member %s did not hear that the settings of bucket %s "
                            "changed: %s", peer.name, bucket, result)

    def forget_bucket(self, bucket: str) -> None:
        """Another member deleted ``bucket``: check it again before the next write, and
        drop its settings."""
        self._known_buckets.discard(bucket)
        self.heard_settings_changed(bucket)

    async def _check_bucket(self, bucket: str) -> None:
        # The cache tier remembers buckets it has seen; a bucket deleted through another
        # member must be looked up again, or a write to it would be acknowledged.
        if bucket not in self._known_buckets:
            await self._inner.head_bucket(bucket)
            self._known_buckets.add(bucket)

    async def _take(self, bucket: str, key: str) -> None:
        """Before serving a key here: wait until this member may (the membership), then a
        state of it handed over here becomes this node's record first (a dict lookup
        when there is none)."""
        await self._membership.admit(bucket, key)
        replication = self._replication
        if replication is not None and (bucket, key) in replication.store.records:
            await replication.adopt(bucket, key)

    @contextlib.asynccontextmanager
    async def _writing(self, bucket: str, key: str) -> AsyncIterator[None]:
        """A write of a key served here: admitted, kept apart from its hand-over, and
        copied to the key's mirrors once done (before it is acknowledged)."""
        await self._take(bucket, key)
        async with self._guard.writing((bucket, key)):
            if not self._membership.view.owns(bucket, key):
                raise SlowDown(f"{bucket}/{key} moved to another cluster member while the "
                               "write waited; retry", retry_after=RETRY_AFTER_S)
            yield
            if self._replication is not None:
                await self._replication.replicate(bucket, key)

    def _wrote_remotely(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._snapshots.pop(task, None)

    async def _on_peers(self, call: Callable[[PeerClient], Awaitable[T]]) -> list[T]:
        return await gather_all([call(p) for p in self._peers.others()])

    # -- buckets -----------------------------------------------------------------------
    async def create_bucket(self, bucket: str) -> BucketInfo:
        info = await self._inner.create_bucket(bucket)
        self._known_buckets.add(bucket)
        return info

    async def delete_bucket(self, bucket: str) -> None:
        """Refused while the bucket holds objects anywhere (BucketNotEmpty); uploads in
        progress are aborted with it, as on S3. Every member's pending deletions reach
        the backend first."""
        await self._inner.head_bucket(bucket)
        async with closing(self.iter_objects(bucket)) as listing:
            async for _ in listing:  # checked before any member aborts an upload
                raise BucketNotEmpty(bucket)
        await self._on_peers(lambda p: p.drain_bucket(bucket))
        if self._cache is not None:
            self._cache.expedite_deletes(bucket)
        await self._inner.delete_bucket(bucket)
        self._known_buckets.discard(bucket)
        peers = self._peers.others()
        results = await asyncio.gather(*(p.forget_bucket(bucket) for p in peers),
                                       return_exceptions=True)
        for peer, result in zip(peers, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("cluster member %s did not hear that bucket %s was deleted: %s",
                            peer.name, bucket, result)

    # -- objects -----------------------------------------------------------------------
    async def put_object(self, bucket: str, key: str, body: DescribedBody, *,
                         meta: ObjectMeta, content_md5: bytes | None = None,
                         if_match: str | None = None, if_none_match: str | None = None,
                         size_hint: int | None = None) -> ObjectInfo:
        owner = self.owner_of(bucket, key)
        if owner is not None:
            self._wrote_remotely()
            return await owner.put_object(bucket, key, body, meta=meta,
                                          content_md5=content_md5, if_match=if_match,
                                          if_none_match=if_none_match)
        await self._check_bucket(bucket)
        async with self._writing(bucket, key):
            if isinstance(self._inner, CacheTier):
                return await self._inner.put_object(
                    bucket, key, body, meta=meta, content_md5=content_md5,
                    if_match=if_match, if_none_match=if_none_match, size_hint=size_hint)
            return await self._inner.put_object(bucket, key, body, meta=meta,
                                                content_md5=content_md5, if_match=if_match,
                                                if_none_match=if_none_match)

    async def get_object(self, bucket: str, key: str, *,
                         byte_range: RangeRequest | None = None) -> ObjectStream:
        owner = self.owner_of(bucket, key)
        if owner is not None:
            try:
                return await owner.get_object(bucket, key, byte_range=byte_range)
            except MemberUnavailable:
                if not key.startswith(CONFIG_PREFIX):
                    raise
                log.warning("reading %s/%r from the shared backend: its owner is down",
                            bucket, key)
                shared = self._inner.inner if isinstance(self._inner, CacheTier) else self._inner
                return await shared.get_object(bucket, key, byte_range=byte_range)
        await self._take(bucket, key)
        return await self._inner.get_object(bucket, key, byte_range=byte_range)

    async def head_object(self, bucket: str, key: str) -> ObjectInfo:
        owner = self.owner_of(bucket, key)
        if owner is not None:
            return await owner.head_object(bucket, key)
        await self._take(bucket, key)
        return await self._inner.head_object(bucket, key)

    async def delete_object(self, bucket: str, key: str) -> None:
        owner = self.owner_of(bucket, key)
        if owner is not None:
            self._wrote_remotely()
            await owner.delete_object(bucket, key)
            return
        await self._check_bucket(bucket)
        async with self._writing(bucket, key):
            await self._inner.delete_object(bucket, key)

    async def replace_metadata(self, bucket: str, key: str, meta: ObjectMeta) -> ObjectInfo:
        owner = self.owner_of(bucket, key)
        if owner is not None:
            self._wrote_remotely()
            return await owner.replace_metadata(bucket, key, meta)
        async with self._writing(bucket, key):
            return await self._inner.replace_metadata(bucket, key, meta)

    async def copy_object(self, src_bucket: str, src_key: str, dst_bucket: str,
                          dst_key: str, *, meta: ObjectMeta,
                          src_etag: str | None = None) -> ObjectInfo:
        """Within this node's keys: the local copy; otherwise the source is streamed
        from its owner (through this node) into the destination's owner."""
        view = self._membership.view
        if view.owns(src_bucket, src_key) and view.owns(dst_bucket, dst_key) \
                and isinstance(self._inner, CopyingBackend):
            await self._check_bucket(dst_bucket)
            await self._take(src_bucket, src_key)
            async with self._writing(dst_bucket, dst_key):
                return await self._inner.copy_object(src_bucket, src_key, dst_bucket,
                                                     dst_key, meta=meta, src_etag=src_etag)
        async with await self.get_object(src_bucket, src_key) as stream:
            if src_etag is not None and stream.info.etag != src_etag.strip('"'):
                raise PreconditionFailed()
            return await self.put_object(dst_bucket, dst_key, bare(aiter(stream)), meta=meta,
                                         size_hint=stream.info.size)

    async def iter_objects(self, bucket: str, *, prefix: str = "",
                           start_after: str = "") -> AsyncIterator[ObjectInfo]:
        """The local listing (backend + this node's cache) merged with the peers'
        unflushed records, which are fetched *before* the backend is read: a record
        flushed in between is then found in the backend."""
        overlay = await self._peer_overlay(bucket, prefix, start_after)
        inner = self._inner.iter_objects(bucket, prefix=prefix, start_after=start_after)
        async for info in merge_sorted(overlay, inner, lambda i: i.key):
            yield info

    def _holders(self, bucket: str, prefix: str) -> list[PeerClient]:
        """The peers that may hold unflushed keys under ``prefix``: all of them, or only
        the owner when the prefix names one key's version records (they live with the
        key), so a versioned write needs no other member."""
        if routing_key(prefix) != prefix:  # every key under it routes as one user key
            owner = self.owner_of(bucket, prefix)
            return [] if owner is None else [owner]
        return self._peers.others()

    async def _peer_overlay(self, bucket: str, prefix: str, start_after: str) -> Overlay:
        replication = self._replication
        if not self._membership.view.others() and replication is None:
            return []
        # S3 listing restarts the iteration past every common prefix; within one request
        # (one task) the snapshot taken before its first backend read stays valid.
        task = asyncio.current_task()
        cached = self._snapshots.get(task) if task is not None else None
        taken = cached.get((bucket, prefix)) if cached is not None else None
        if taken is not None and start_after >= taken[0]:
            overlay = taken[1]
            return overlay[bisect.bisect_right(overlay, start_after, key=lambda p: p[0]):]
        overlay = await self._snapshot(bucket, prefix, start_after)
        if task is not None:
            self._snapshots.setdefault(task, {})[(bucket, prefix)] = (start_after, overlay)
        return overlay

    async def _snapshot(self, bucket: str, prefix: str, start_after: str) -> Overlay:
        """Every member's unflushed records in the range, all taken at one view once
        its hand-overs have ended: each key's newest state is then held by its owner
        (docs/cluster.md, "Listings")."""
        revision = 0
        for _ in range(LISTING_ATTEMPTS):
            revision = await self._membership.quiescent(revision)
            peers = self._holders(bucket, prefix)
            try:
                snapshots = await gather_all([p.dirty(bucket, prefix, start_after, revision)
                                              for p in peers])
            except ViewChanged as changed:
                revision = max(revision + 1, changed.revision)
                continue
            if self._membership.view.revision != revision:
                revision = self._membership.view.revision
                continue
            if self._replication is not None:
                snapshots.append(self._replication.unadopted(bucket, prefix, start_after))
            return sorted({key: info for snapshot in snapshots for key, info in snapshot
                           }.items(), key=lambda pair: pair[0])
        raise SlowDown("the cluster's membership kept changing during the listing; retry",
                       retry_after=RETRY_AFTER_S)

    # -- multipart (uploads belong to the key's owner; requests are forwarded there) ----
    async def create_multipart_upload(self, bucket: str, key: str, *,
                                      meta: ObjectMeta) -> UploadInfo:
        await self._check_bucket(bucket)
        return await self._multipart().create_multipart_upload(bucket, key, meta=meta)

    async def complete_multipart_upload(self, bucket: str, key: str, upload_id: str,
                                        parts: Sequence[CompletedPart], *,
                                        if_match: str | None = None,
                                        if_none_match: str | None = None) -> ObjectInfo:
        await self._check_bucket(bucket)
        async with self._writing(bucket, key):
            return await self._multipart().complete_multipart_upload(
                bucket, key, upload_id, parts, if_match=if_match,
                if_none_match=if_none_match)

    async def iter_multipart_uploads(self, bucket: str, *,
                                     prefix: str = "") -> AsyncIterator[UploadInfo]:
        snapshots: list[UploadsSnapshot] = await self._on_peers(
            lambda p: p.uploads(bucket, prefix))
        theirs = sorted(((u.key, u.initiated, u.upload_id), u)
                        for s in snapshots for u in s.uploads)
        cached = {u.upload_id for s in snapshots for u in s.uploads}
        hidden_ids = set().union(*(s.hidden_ids for s in snapshots))
        hidden_keys = set().union(*(s.hidden_keys for s in snapshots))
        inner = self._multipart().iter_multipart_uploads(bucket, prefix=prefix)
        async for info in merge_sorted(theirs, inner,
                                       lambda u: (u.key, u.initiated, u.upload_id)):
            # Backend uploads the peers' flushers opened are theirs, not the client's.
            if info.upload_id in hidden_ids or (info.key in hidden_keys
                                                and info.upload_id not in cached):
                continue
            yield info
