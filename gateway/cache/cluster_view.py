"""What the cluster layer needs of one member's cache tier, in one place.

A member exports its unflushed records and uploads to the others' listings, drops clean
copies of keys another member may now change, hands over the records of keys it no
longer owns, and flushes some records before the others (pending deletes before a
DeleteBucket). The
cluster code (``gateway/cluster``) uses only this view, never the store's fields or locks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from backends.core.base import UploadInfo
from backends.core.errors import NoSuchUpload
from gateway.cache.entry import Entry
from gateway.cache.tier import CacheTier


@dataclass(frozen=True, slots=True)
class UploadsHeld:
    """The multipart uploads a member holds in its cache for one bucket, and the backend
    uploads a listing must hide (the flusher's and those of cached uploads, by id, or by
    key while their id is not known yet)."""

    uploads: list[UploadInfo]
    hidden_ids: list[str]
    hidden_keys: list[str]


class ClusterView:
    """The cluster layer's view of this member's cache tier ``tier``."""

    def __init__(self, tier: CacheTier) -> None:
        self._tier = tier
        self._store = tier.store

    def dirty_snapshot(self, bucket: str, prefix: str = "",
                       start_after: str = "") -> list[Entry]:
        """The unflushed records (tombstones included) of ``bucket`` whose keys start
        with ``prefix`` and sort after ``start_after``, in key order, as they are now."""
        return self._store.records.dirty_in(bucket, prefix, start_after)

    def uploads(self, bucket: str, prefix: str = "") -> UploadsHeld:
        """The cached uploads of ``bucket`` (keys starting with ``prefix``), now."""
        store = self._store
        return UploadsHeld(
            uploads=[u.info() for u in store.uploads_in(bucket, prefix)],
            hidden_ids=[i for i, bk in store.flush_uploads() if bk[0] == bucket],
            hidden_keys=store.keys_creating_uploads(bucket))

    def holds_objects(self, bucket: str) -> bool:
        """Whether an unflushed object (not a pending delete) of ``bucket`` is held here."""
        return self._store.records.has_live_dirty(bucket)

    async def abort_uploads(self, bucket: str) -> None:
        """Abort the uploads in progress of ``bucket`` held here (it is being deleted)."""
        for upload in self._store.uploads_in(bucket):
            with contextlib.suppress(NoSuchUpload):
                await self._tier.abort_multipart_upload(bucket, upload.key, upload.upload_id)

    def expedite_deletes(self, bucket: str) -> int:
        """Flush the pending deletes of ``bucket`` before anything else (a DeleteBucket
        waits for them). Returns how many there are."""
        return self._expedite(bucket, lambda e: e.deleted)

    async def drop_clean(self, bucket: str,
                         keep: Callable[[str], bool] | None = None) -> int:
        """Drop the clean records of ``bucket`` (except the keys ``keep`` accepts): the
        backend has them, and another member may change them. Returns how many."""
        store = self._store
        dropped = 0
        for key in list(store.entries_of(bucket)):
            if keep is not None and keep(key):
                continue
            async with store.keys.hold((bucket, key)):
                entry = store.get(bucket, key)
                if entry is not None and not entry.dirty:
                    await store.commit((bucket, key), None, sync=False)
                    dropped += 1
        return dropped

    def held_keys(self) -> list[tuple[str, str]]:
        """Every key this member holds a record of (clean or not), as it is now."""
        return [e.bk for e in self._store.records.values()]

    def dirty_keys(self) -> list[tuple[str, str]]:
        """Every key whose record here is unflushed, as it is now."""
        return [e.bk for e in self._store.dirty_entries()]

    def flushes_held_back(self, bucket: str, key: str) -> AbstractAsyncContextManager[None]:
        """No flush of the key while the block runs, the one in flight stopped first (the
        key is being handed over: a flush landing after the new owner's would put an
        older version on the backend)."""
        return self._tier.flushes_held_back(bucket, key)

    async def discard_all(self) -> int:
        """Forget every record, unflushed ones included, without flushing (this member
        starts anew: the others hold newer states of its keys). A flush in flight is
        stopped first: one taken before this member may flush (waiting for its lease)
        would land after the new owners' flushes. How many."""
        dropped = 0
        for bucket, key in self.held_keys():
            async with self._tier.flushes_held_back(bucket, key):
                dropped += await self.discard(bucket, key, sync=False)
        await self._store.barrier()
        return dropped

    async def wait_flushed(self, bucket: str) -> None:
        """Return once everything unflushed in ``bucket`` now is on the backend (except
        records the backend refused for good)."""
        await self._tier.wait_flushed(bucket)

    async def drain_bucket(self, bucket: str) -> None:
        """:meth:`wait_flushed` for DeleteBucket: SlowDown once it took too long."""
        await self._tier.drain_bucket(bucket)

    # -- mirrored write-back (gateway/cluster/replication.py) ---------------------------
    def entry(self, bucket: str, key: str) -> Entry | None:
        """This member's record of the key, as it is now."""
        return self._store.get(bucket, key)

    def on_flushed(self, listener: Callable[[tuple[str, str]], None]) -> None:
        """Call ``listener((bucket, key))`` each time a flush makes a record clean."""
        self._store.on_flushed(listener)

    async def discard(self, bucket: str, key: str, *, sync: bool = True) -> bool:
        """Forget the key's record without flushing it (a newer state of the key is
        held elsewhere); a flush already in flight completes. Whether one was held."""
        store = self._store
        async with store.keys.hold((bucket, key)):
            if store.get(bucket, key) is None:
                return False
            await store.commit((bucket, key), None, sync=sync and store.sync)
            return True

    def expedite(self, bucket: str, key: str) -> None:
        """Flush the key's record ahead of others (it was taken over from a member that
        is down)."""
        entry = self._store.get(bucket, key)
        if entry is not None and entry.dirty:
            self._store.make_urgent(entry.bk)
            self._store.changed()

    def _expedite(self, bucket: str, which: Callable[[Entry], bool]) -> int:
        store = self._store
        chosen = [e.bk for e in store.dirty_entries(bucket) if which(e)]
        if chosen:
            store.make_urgent(*chosen)
            store.changed()  # (the flusher takes urgent records first)
        return len(chosen)
