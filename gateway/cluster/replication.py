"""Mirrored write-back (``--dirty-replicas R``, with a coordinator): the unflushed writes
of a key are kept by its owner and by the next R-1 members of its preference list.

* **Writes.** After a write of a key this member owns is durable in its own cache, the
  key's state (bytes and info, or a deletion) is copied to its mirrors
  (``PUT /_squall/peer/mirror``); each keeps it durably, and only if it agrees that this
  member owns the key, before answering. Then the write is acknowledged; a mirror that
  fails makes it 503 SlowDown instead (the write may still become visible, as after a
  timeout). Copies carry ``(epoch, seq)``: the etcd revision of the view the write was
  served under and this member's record sequence; a holder keeps only the newest.
* **The only copy.** A write acknowledged with no copy elsewhere (``--dirty-replicas 1``,
  or no other member to keep one) makes this member *held*
  (gateway/cluster/coordinator/membership.py): it stays in the ring while it is down, and
  its keys wait for it. Once every such write is flushed or copied, it stops being held.
* **Flushes.** Only the owner flushes. A loop sees its records become clean and tells the
  mirrors, in batches, to drop their copies (``POST /_squall/peer/mirror-drop``).
* **Owners change** (gateway/cluster/rebalance.py): whoever holds a state of a key that
  moved (the old owner's record, a mirror's copy) sends it to the new owner, which
  *adopts* the newest before it serves the key: it becomes a dirty record of its cache
  and is copied to its own mirrors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import AsyncIterator

from backends.core.base import Backend, ObjectInfo, bare
from backends.core.errors import NoSuchKey, SlowDown, StorageError
from gateway.background import PeriodicTask
from gateway.cache.cluster_view import ClusterView
from gateway.cache.keylock import KeyLocks
from gateway.cluster.coordinator.membership import EtcdMembership
from gateway.cluster.mirror_batches import MirrorBatches
from gateway.cluster.mirror_store import BK, MirrorRecord, MirrorStore
from gateway.cluster.remote import Peers
from gateway.cluster.wire import MirrorCopy

log = logging.getLogger("squall.cluster")
CLEAN_SEQ = 2 ** 62  # a drop "up to the newest": the key is clean on its owner
DROP_INTERVAL_S = 0.5
ADOPT_INTERVAL_S = 1.0
WHOLE_COPY_BYTES = 64 << 10  # a copy up to this size is read whole before it is sent
RETRY_AFTER_S = 1
#: copies of a write tried, each after the view changed (a mirror left or died)
MIRROR_ATTEMPTS = 3


class Replication:
    """This member's part in mirrored write-back and in the hand-over of keys."""

    def __init__(self, membership: EtcdMembership, store: MirrorStore, cache: ClusterView,
                 local: Backend, peers: Peers) -> None:
        self.membership = membership
        self.store = store
        self._cache = cache
        self._local = local
        self._peers = peers
        self._locks = KeyLocks()
        self._batches = MirrorBatches(lambda node, copies:
                                      self._peers.get(node).mirror_batch(copies))
        # key -> (epoch, seq, mirrors): copies sent, to drop once the key is clean here
        self._pending: dict[BK, tuple[int, int, tuple[str, ...]]] = {}
        self._flushed: set[BK] = set()  # keys a flush made clean since the last drops
        self._under: set[BK] = set()  # dirty keys whose only copy is this member's
        cache.on_flushed(self._was_flushed)
        self._drops = PeriodicTask(
            self._drop_flushed, every=DROP_INTERVAL_S, wait_first=True,
            name="cluster-mirror-drops", log=log,
            failed="telling mirrors about flushed keys (retried)")
        self._adopted_at = (0, 0)  # the ownership revisions of the last full round
        self._adoptions = PeriodicTask(self._adopt_owned, every=ADOPT_INTERVAL_S,
                                       wait_first=True, name="cluster-mirror-adopt", log=log,
                                       failed="taking keys over")

    @property
    def _name(self) -> str:
        return self.membership.name

    # -- lifecycle ---------------------------------------------------------------------
    async def load(self) -> None:
        """Read the copies kept here (before this member registers)."""
        await self.store.load()

    async def start_anew(self) -> None:
        """This member starts with a new lease and is not held: what it holds is older
        than what the others hold now (they took its keys over): drop it all."""
        copies = await self.store.clear()
        dropped = await self._cache.discard_all()
        self._pending.clear()
        self._flushed.clear()
        self._under.clear()
        if copies or dropped:
            log.warning("this member starts anew in the cluster: %d cached records and %d "
                        "mirror copies from before are dropped (the other members took "
                        "its keys over)", dropped, copies)

    def start(self) -> None:
        self._drops.start()
        self._adoptions.start()
        if self.membership.holding:  # its earlier writes may have no copy yet
            self._under.update(self._cache.dirty_keys())

    async def stop(self) -> None:
        await self._adoptions.stop()
        await self._drops.stop()
        await self.store.close()

    async def reconcile(self) -> None:
        """After a start: the copies the others hold of this member's writes are tracked
        again (to drop once flushed), or dropped at once when the key is clean here."""
        registered = self.membership.registered_at(self._name) or 0
        for peer in self._peers.others():
            try:
                held = await peer.copies()
            except StorageError as exc:
                log.warning("member %s could not be asked for its copies of this member's "
                            "writes: %s", peer.name, exc)
                continue
            stale = []
            for bucket, key, epoch, seq in held:
                if epoch < registered:
                    continue  # of a run before it started anew: its holder sends it here
                entry = self._cache.entry(bucket, key)
                if entry is not None and entry.dirty:
                    old = self._pending.get((bucket, key))
                    mirrors = tuple({*(old[2] if old else ()), peer.name})
                    self._pending[(bucket, key)] = (epoch, seq, mirrors)
                else:
                    stale.append((bucket, key, epoch, CLEAN_SEQ))
            if stale:
                await self._send_drops({peer.name: stale})

    # -- writes ------------------------------------------------------------------------
    async def replicate(self, bucket: str, key: str) -> None:
        """Copy the key's state here to its mirrors (after a write of it here); SlowDown
        if a mirror did not keep it."""
        bk = (bucket, key)
        await self._locks.acquire(bk)
        try:
            await self._replicate(bucket, key)
        finally:
            self._locks.release(bk)

    async def _replicate(self, bucket: str, key: str) -> None:
        bk = (bucket, key)
        membership = self.membership
        for attempt in range(MIRROR_ATTEMPTS):
            view = membership.view
            epoch = view.revision
            entry = self._cache.entry(bucket, key)
            old = self._pending.get(bk)
            if entry is None or not entry.dirty:
                self._under.discard(bk)
                if old is not None:
                    del self._pending[bk]
                    await self._send_drops({n: [(bucket, key, epoch, CLEAN_SEQ)]
                                            for n in old[2]})
                return
            if not view.owns(bucket, key):  # moved meanwhile: every mirror would refuse
                raise SlowDown(f"{bucket}/{key} moved to another cluster member while it "
                               "was written here; the write is not acknowledged",
                               retry_after=RETRY_AFTER_S)
            seq = entry.seq
            targets = tuple(view.mirrors(bucket, key, membership.replicas))
            results = await asyncio.gather(
                *(self._copy_to(n, bucket, key, epoch, seq, entry.deleted)
                  for n in targets), return_exceptions=True)
            failed = [(n, r) for n, r in zip(targets, results, strict=True)
                      if isinstance(r, BaseException)]
            # (a member whose copy failed may hold an older one: it is told to drop too)
            self._pending[bk] = (epoch, seq, tuple({*targets, *(old[2] if old else ())}))
            now = self._cache.entry(bucket, key)
            if now is None or not now.dirty:  # flushed while the copies were sent
                self._flushed.add(bk)
            if not failed:
                break
            # A mirror that left or died is replaced once the view says so (within a
            # lease's TTL): the write waits for that rather than failing.
            if attempt + 1 < MIRROR_ATTEMPTS and await membership.view_changed(view):
                continue
            node, error = failed[0]
            raise SlowDown(f"a copy of {bucket}/{key} could not be kept by cluster member "
                           f"{node} ({error}); the write is not acknowledged",
                           retry_after=RETRY_AFTER_S)
        gone = tuple(n for n in self._pending[bk][2] if n not in targets)
        if gone:  # mirrors of an earlier write no longer mirror the key
            await self._send_drops({n: [(bucket, key, epoch, CLEAN_SEQ)] for n in gone})
            self._pending[bk] = (epoch, seq, targets)
        if not targets:  # this member holds the only copy
            await membership.hold()  # before the write is acknowledged
            self._under.add(bk)
        else:
            self._under.discard(bk)

    async def _copy_to(self, node: str, bucket: str, key: str, epoch: int, seq: int,
                       deleted: bool, *, handoff: bool = False) -> None:
        peer = self._peers.get(node)
        stream = None
        if not deleted:
            with contextlib.suppress(NoSuchKey):
                stream = await self._local.get_object(bucket, key)
        if stream is None:  # a deletion
            await self._send_copy(node, MirrorCopy(bucket, key, epoch, seq, None, b""),
                                  handoff)
            return
        async with stream:
            if stream.info.size > WHOLE_COPY_BYTES:  # streamed
                await peer.mirror_put(bucket, key, epoch=epoch, seq=seq, info=stream.info,
                                      body=aiter(stream), handoff=handoff)
                return
            body = b"".join([chunk async for chunk in stream])  # sent with the head
        await self._send_copy(node, MirrorCopy(bucket, key, epoch, seq, stream.info, body),
                              handoff)

    async def _send_copy(self, node: str, copy: MirrorCopy, handoff: bool) -> None:
        """A small copy: a mirror's goes with the others sent to ``node`` meanwhile."""
        if not handoff:
            await self._batches.put(node, copy)
            return
        await self._peers.get(node).mirror_put(copy.bucket, copy.key, epoch=copy.epoch,
                                               seq=copy.seq, info=copy.info,
                                               body=copy.body, handoff=True)

    async def remirror(self) -> None:
        """The view changed: the dirty keys whose mirrors changed (or that had too few)
        are copied to their mirrors now. A newer view ends it: the keys that moved are
        handed over first, and it runs again for that view (a copy of a key this member
        no longer owns would be refused by every mirror, each after a lease's wait)."""
        view = self.membership.view
        for bk, (_, _, mirrors) in list(self._pending.items()):
            if self.membership.view is not view:
                return
            if not view.owns(*bk):
                continue
            wanted = tuple(view.mirrors(*bk, self.membership.replicas))
            if wanted != mirrors or (bk in self._under and wanted):
                try:
                    await self.replicate(*bk)
                except StorageError as exc:
                    log.warning("copying %s/%r to its new mirrors failed (retried at the "
                                "next change or write): %s", bk[0], bk[1], exc)

    # -- hand-over (gateway/cluster/rebalance.py) ---------------------------------------
    async def hand_over(self, bucket: str, key: str, target: str) -> None:
        """Send this member's state of a key it no longer owns to ``target`` (its new
        owner), then forget it: the record (dirty or clean; clean: the backend has it,
        copies held elsewhere must go) and what the mirrors were told. The state carries
        the view's revision as its epoch: it is newer than any copy of the key."""
        bk = (bucket, key)
        async with self._cache.flushes_held_back(bucket, key):
            entry = self._cache.entry(bucket, key)
            epoch = self.membership.view.revision
            if entry is not None and entry.dirty:
                await self._copy_to(target, bucket, key, epoch, entry.seq, entry.deleted,
                                    handoff=True)
            elif entry is not None or bk in self._pending:
                await self._peers.get(target).mirror_put(
                    bucket, key, epoch=epoch, seq=CLEAN_SEQ, info=None, body=b"",
                    handoff=True)
            self._pending.pop(bk, None)
            self._under.discard(bk)
            self._flushed.discard(bk)
            await self._cache.discard(bucket, key)

    async def pass_on(self, record: MirrorRecord, target: str) -> None:
        """Send a copy held here to ``target`` (the key's owner now) and drop it."""
        bk = (record.bucket, record.key)
        await self.store.locks.acquire(bk)  # (not dropped while it is read)
        try:
            held = self.store.records.get(bk)
            if held is None:
                return
            body: AsyncIterator[bytes] | bytes = b"" if held.deleted else self.store.read(held)
            await self._peers.get(target).mirror_put(
                held.bucket, held.key, epoch=held.epoch, seq=held.seq, info=held.info,
                body=body, handoff=True)
        finally:
            self.store.locks.release(bk)
        await self.store.drop([(held.bucket, held.key, held.epoch, held.seq)])

    # -- adoption ----------------------------------------------------------------------
    async def adopt(self, bucket: str, key: str) -> None:
        """Before serving a key: a state of it handed over here (or a copy held for an
        owner that is gone) becomes this member's record, and is copied to its mirrors.
        A dirty record of its own is newer (this member has served the key since), or the
        same state (a copy of it, sent back): it stays, and is copied again."""
        bk = (bucket, key)
        if bk not in self.store.records:
            return
        await self._locks.acquire(bk)
        try:
            record = self.store.records.get(bk)
            if record is None:
                return
            entry = self._cache.entry(bucket, key)
            own = entry is not None and entry.dirty
            if not own:
                if record.seq == CLEAN_SEQ:  # the backend has the newest state
                    await self._cache.discard(bucket, key)
                else:
                    await self._install(bucket, key, record.info,
                                        None if record.deleted else self.store.read(record))
                    self._cache.expedite(bucket, key)
                    await self._replicate(bucket, key)
                log.debug("took %s/%r over (from %s)", bucket, key, record.owner)
            await self.store.drop([(bucket, key, record.epoch, record.seq)])
            if own:  # the copy may have been a mirror's (sent back after a restart)
                await self._replicate(bucket, key)
        finally:
            self._locks.release(bk)

    async def _install(self, bucket: str, key: str, info: ObjectInfo | None,
                       body: AsyncIterator[bytes] | None) -> None:
        if body is None or info is None:
            with contextlib.suppress(NoSuchKey):
                await self._local.delete_object(bucket, key)
            return
        await self._local.put_object(bucket, key, bare(body), meta=info.meta)

    async def _adopt_owned(self) -> None:
        """One round: take over the keys this member owns now whose copies it holds.
        Every copy is looked at when the view or the settled view changed, else only
        those put since the last round (a copy's key is not owned here otherwise)."""
        membership = self.membership
        if not membership.serving():
            return
        fresh, self.store.fresh = self.store.fresh, set()
        revisions = membership.ownership_revisions
        if revisions != self._adopted_at:
            self._adopted_at = revisions
            fresh = set(self.store.records)
        for bucket, key in fresh:
            record = self.store.records.get((bucket, key))
            if record is None or not membership.view.owns(bucket, key) \
                    or record.owner == self._name \
                    or not membership.owned_since_settled(bucket, key):
                continue
            try:
                await self.adopt(bucket, key)
            except Exception as exc:  # noqa: BLE001 - retried at the next round
                self.store.fresh.add((bucket, key))
                log.warning("taking %s/%r over failed: %r", bucket, key, exc)
        if not self._under and membership.holding:
            with contextlib.suppress(StorageError):
                await membership.unhold()

    def unadopted(self, bucket: str, prefix: str = "", after: str = ""
                  ) -> list[tuple[str, ObjectInfo | None]]:
        """The states of keys this member owns held here and not adopted yet, in the
        range, sorted by key (a deletion: None): a listing shows them (they are
        acknowledged writes)."""
        view = self.membership.view
        found = [(r.key, r.info) for r in list(self.store.records.values())
                 if r.bucket == bucket and r.key > after and r.key.startswith(prefix)
                 and r.seq != CLEAN_SEQ and view.owns(r.bucket, r.key)
                 and self._cache.entry(r.bucket, r.key) is None]
        found.sort(key=lambda pair: pair[0])
        return found

    def copies_of(self, member: str) -> list[tuple[str, str, int, int]]:
        """The copies held here of ``member``'s writes."""
        return [(r.bucket, r.key, r.epoch, r.seq) for r in self.store.held_for(member)]

    # -- flush confirmations -----------------------------------------------------------
    def _was_flushed(self, bk: BK) -> None:
        self._under.discard(bk)
        if bk in self._pending:
            self._flushed.add(bk)

    async def _drop_flushed(self) -> None:
        """Tell the mirrors of the keys flushed since the last round to drop them (only
        those keys are looked at: no scan of everything pending)."""
        flushed, self._flushed = self._flushed, set()
        try:
            await self._drop_these(flushed)
        except BaseException:
            self._flushed |= flushed
            raise

    async def _drop_these(self, flushed: set[BK]) -> None:
        batches: dict[str, list[tuple[str, str, int, int]]] = defaultdict(list)
        done: list[tuple[BK, tuple[int, int, tuple[str, ...]]]] = []
        for bk in flushed:
            pending = self._pending.get(bk)
            entry = self._cache.entry(*bk)
            if pending is None or (entry is not None and entry.dirty):
                continue  # not mirrored, or written again since (its copy is newer)
            epoch, seq, mirrors = pending
            for node in mirrors:
                batches[node].append((bk[0], bk[1], epoch, seq))
            done.append((bk, pending))
        if not done:
            return
        failed = await self._send_drops(batches)
        for bk, pending in done:
            if any(node in failed for node in pending[2]):
                self._flushed.add(bk)  # again at the next round: a stale copy must go
            elif self._pending.get(bk) == pending:
                del self._pending[bk]

    async def _send_drops(self, batches: dict[str, list[tuple[str, str, int, int]]]
                          ) -> set[str]:
        """Send the drops; the members that could not be told (a member that left the
        view gets none: its copies were passed on or dropped when it left)."""
        failed = set()
        members = self.membership.view.members
        for node, items in batches.items():
            if node not in members:
                continue
            try:
                await self._peers.get(node).mirror_drop(items)
            except StorageError as exc:
                failed.add(node)
                log.warning("member %s did not drop %d flushed mirror copies (will "
                            "retry): %s", node, len(items), exc)
        return failed
