"""Mirrored write-back (``--dirty-replicas R``): the unflushed writes of a key are kept
by its owner and by the next R-1 members on its ring, so they survive the owner.

* **Writes.** After a write of a key this member serves is durable in its own cache, the
  key's state (bytes and info, or a deletion) is copied to its mirrors
  (``PUT /_squall/peer/mirror``), each of which keeps it durably before answering; only
  then is the write acknowledged. Copies carry ``(epoch, seq)``: the owner epoch and the
  serving member's record sequence; a mirror keeps only the newest.
* **Flushes.** Only the serving member flushes. A loop sees its records become clean
  (or go, for flushed deletions) and tells the mirrors, in batches, to drop their copies
  (``POST /_squall/peer/mirror-drop``).
* **Failover.** While the owner is down (health), the next member on the key's ring that
  is up serves the key: before it touches a key it *adopts* its mirror copy (the bytes
  become a dirty record of its cache, flushed first, and copied to its own mirrors), and
  a loop adopts the rest. Its writes use the owner's epoch + 1.
* **Return.** Before serving, a member *claims* its keys back: every other member
  answers with the epoch it knows, the keys it wrote for it (acting) and the mirror
  copies it holds. The member takes the highest epoch + 1, discards its own records of
  the keys others wrote meanwhile and takes their state from them (then tells them to
  release it), and re-mirrors (or, with a lost disk, takes back) the rest.

See docs/cluster.md, "Mirrored write-back", for the crash windows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import AsyncIterator

from backends.base import Backend, ObjectInfo, bare
from backends.errors import NoSuchKey, StorageError
from gateway.background import BackgroundLoop
from gateway.cache.cluster_view import ClusterView
from gateway.cache.keylock import KeyLocks
from gateway.cluster.mirror_store import BK, MirrorStore
from gateway.cluster.placement import Placement
from gateway.cluster.remote import ClaimAnswer, HeldCopy, PeerClient
from gateway.cluster.ring import Ring

log = logging.getLogger("squall.cluster")
CLEAN_SEQ = 2 ** 62  # a drop "up to the newest": the key is clean on its serving member
DROP_INTERVAL_S = 0.5
ADOPT_INTERVAL_S = 1.0


class Replication:
    """This member's part in mirrored write-back (active when ``placement.mirrored``)."""

    def __init__(self, placement: Placement, store: MirrorStore, cache: ClusterView,
                 local: Backend, peers: dict[int, PeerClient]) -> None:
        self.placement = placement
        self.store = store
        self._cache = cache
        self._local = local
        self._peers = peers
        self._locks = KeyLocks()
        # key -> (epoch, seq, mirrors): copies sent, to drop once the key is clean here
        self._pending: dict[BK, tuple[int, int, tuple[int, ...]]] = {}
        self._acting: set[int] = set()  # owners whose keys this member has served
        self._flushed: set[BK] = set()  # keys a flush made clean since the last drops
        self._drop_round = asyncio.Lock()  # held by a round of drops (names node ids)
        cache.on_flushed(self._was_flushed)
        self._drops = BackgroundLoop(self._drop_loop, "cluster-mirror-drops")
        self._adoptions = BackgroundLoop(self._adopt_loop, "cluster-mirror-adopt")

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        """Load the mirror copies, claim this member's keys back, start the loops."""
        fresh = not (self.store.root / "epochs.json").exists()
        await self.store.load(self._ring.id)
        await self.claim(fresh=fresh)
        self._drops.start()
        self._adoptions.start()

    async def stop(self) -> None:
        await self._adoptions.stop()
        await self._drops.stop()

    @property
    def _ring(self) -> Ring:
        return self.placement.ring  # (a live membership change replaces it)

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """No round of drops runs meanwhile (a live membership change renumbers the
        members it names)."""
        async with self._drop_round:
            yield

    async def purge(self, *, ring_id: str | None = None) -> int:
        """Drop every copy held here (a live membership change, once every member has
        flushed everything: they are garbage); how many. With ``ring_id`` (the change is
        committed) the copies sent, epochs and keys acted for are forgotten too: they
        name members by node id, which the change renumbers. Without it the change may
        still be aborted, so the drops owed to the mirrors are still sent (a mirror that
        missed this purge must not keep a stale copy)."""
        if ring_id is not None:
            self._pending.clear()
            self._flushed.clear()
            self._acting.clear()
        return await self.store.clear(ring_id=ring_id)

    def epoch_of(self, owner: int) -> int:
        return self.store.epochs.get(owner, 0)

    # -- writes ------------------------------------------------------------------------
    async def replicate(self, bucket: str, key: str) -> None:
        """Copy the key's state here to its mirrors (after a write of it here)."""
        bk = (bucket, key)
        await self._locks.acquire(bk)
        try:
            await self._replicate(bucket, key)
        finally:
            self._locks.release(bk)

    async def _replicate(self, bucket: str, key: str) -> None:
        bk = (bucket, key)
        owner = self._ring.owner(bucket, key)
        if owner != self._ring.self_index:
            await self._act_for(owner)
            await self.store.note_acted(owner, bk)
        epoch = self.epoch_of(owner)
        entry = self._cache.entry(bucket, key)
        if entry is None or not entry.dirty:
            old = self._pending.pop(bk, None)
            if old is not None:
                await self._send_drops({n: [(bucket, key, epoch, CLEAN_SEQ)] for n in old[2]})
            return
        targets = tuple(self.placement.mirrors(bucket, key))
        results = await asyncio.gather(
            *(self._copy_to(n, bucket, key, owner, epoch, entry.seq, entry.deleted)
              for n in targets), return_exceptions=True)
        for node, result in zip(targets, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("mirroring %s/%r to member %d failed (acknowledged with "
                            "fewer copies): %s", bucket, key, node, result)
        old = self._pending.get(bk)
        gone = tuple(n for n in (old[2] if old else ()) if n not in targets)
        # (a member whose copy failed may hold an older one: it is told to drop too)
        self._pending[bk] = (epoch, entry.seq, targets)
        now = self._cache.entry(bucket, key)
        if now is None or not now.dirty:  # flushed while the copies were sent
            self._flushed.add(bk)
        if gone:  # mirrors of an earlier write no longer mirror the key
            await self._send_drops({n: [(bucket, key, epoch, CLEAN_SEQ)] for n in gone})

    async def _copy_to(self, node: int, bucket: str, key: str, owner: int, epoch: int,
                       seq: int, deleted: bool) -> None:
        peer = self._peers[node]
        if deleted:
            await peer.mirror_put(bucket, key, owner=owner, epoch=epoch, seq=seq, info=None,
                                  body=_empty())
            return
        try:
            stream = await self._local.get_object(bucket, key)
        except NoSuchKey:
            await peer.mirror_put(bucket, key, owner=owner, epoch=epoch, seq=seq, info=None,
                                  body=_empty())
            return
        async with stream:
            await peer.mirror_put(bucket, key, owner=owner, epoch=epoch, seq=seq,
                                  info=stream.info, body=aiter(stream))

    async def _act_for(self, owner: int) -> None:
        """The first write for a down ``owner`` since it went down starts a new epoch."""
        if owner not in self._acting:
            self._acting.add(owner)
            await self.store.raise_epoch(owner, self.epoch_of(owner) + 1)
            log.warning("cluster member %d is down: this member takes over the keys of it "
                        "that it mirrors (owner epoch %d)", owner, self.epoch_of(owner))

    # -- failover ----------------------------------------------------------------------
    async def adopt(self, bucket: str, key: str) -> None:
        """Before serving a key of a member that is down: take its mirror copy, if any,
        into this member's cache (a dirty record flushed first) and mirror it."""
        bk = (bucket, key)
        if bk not in self.store.records:
            return
        await self._locks.acquire(bk)
        try:
            record = self.store.records.get(bk)
            if record is None:
                return
            owner = record.owner
            await self._act_for(owner)
            await self.store.raise_epoch(owner, record.epoch + 1)
            await self._install(bucket, key, record.info,
                                None if record.deleted else self.store.read(record))
            await self.store.drop([(bucket, key, record.epoch, record.seq)])
            self._cache.expedite(bucket, key)
            await self._replicate(bucket, key)
            log.debug("took over %s/%r from member %d (down)", bucket, key, owner)
        finally:
            self._locks.release(bk)

    async def _install(self, bucket: str, key: str, info: ObjectInfo | None,
                       body: AsyncIterator[bytes] | None) -> None:
        if body is None or info is None:
            with contextlib.suppress(NoSuchKey):
                await self._local.delete_object(bucket, key)
            return
        await self._local.put_object(bucket, key, bare(body), meta=info.meta)

    async def _adopt_loop(self) -> None:
        while True:
            await asyncio.sleep(ADOPT_INTERVAL_S)
            for bucket, key in list(self.store.records):
                record = self.store.records.get((bucket, key))
                if record is None or not self.placement.down(record.owner):
                    continue
                if self.placement.owner(bucket, key) != self._ring.self_index:
                    continue
                try:
                    await self.adopt(bucket, key)
                except Exception as exc:  # noqa: BLE001 - retried at the next round
                    log.warning("taking over %s/%r failed: %r", bucket, key, exc)
            for owner in list(self._acting):
                if not self.placement.down(owner):
                    self._acting.discard(owner)

    # -- removal of a member that is down ------------------------------------------------
    async def hand_over(self, lost: int) -> int:
        """A live removal of ``lost`` (down), first step on every remaining member: each
        mirror copy of its keys held here goes to the member that stands in for the key
        (:meth:`Placement.stand_in`) unless that is this member; the receiver keeps the
        newest copy per key, ``(epoch, seq)`` ordered, as for any mirror copy. How many
        were sent. Raises (the change is aborted) if one cannot be sent."""
        me = self._ring.self_index
        sent = 0
        for record in self.store.held_for(lost):
            bk = (record.bucket, record.key)
            target = self.placement.stand_in(*bk, lost)
            if target is None or target == me:
                continue
            await self.store.locks.acquire(bk)  # (not dropped while it is read)
            try:
                held = self.store.records.get(bk)
                if held is None:
                    continue  # dropped meanwhile: its write was flushed
                body = _empty() if held.deleted else self.store.read(held)
                await self._peers[target].mirror_put(
                    held.bucket, held.key, owner=held.owner, epoch=held.epoch,
                    seq=held.seq, info=held.info, body=body)
            finally:
                self.store.locks.release(bk)
            sent += 1
        return sent

    async def take_over(self, lost: int) -> tuple[int, int]:
        """Second step (every member has handed its copies over): adopt each copy of
        ``lost``'s keys this member stands in for, so that the hand-off flushes it;
        (adopted, dropped). A copy of a key this member has served for ``lost`` since it
        went down is dropped unless it is newer than this member's own last write of it
        (a copy elsewhere is a mirror of that write, or older): a newer write made here
        is never replaced by an older copy."""
        me = self._ring.self_index
        acted = self.store.acted.get(lost, set())
        adopted = dropped = 0
        for record in self.store.held_for(lost):
            bk = (record.bucket, record.key)
            if self.placement.stand_in(*bk, lost) != me:
                continue  # (handed over to the member that stands in)
            own = self._pending.get(bk)
            if bk in acted and (own is None or record.version <= own[:2]):
                await self.store.drop([(*bk, record.epoch, record.seq)])
                dropped += 1
                continue
            await self.adopt(*bk)
            adopted += 1
        return adopted, dropped

    # -- flush confirmations -----------------------------------------------------------
    async def _drop_loop(self) -> None:
        while True:
            await asyncio.sleep(DROP_INTERVAL_S)
            try:
                async with self._drop_round:
                    await self._drop_flushed()
            except Exception:
                log.exception("telling mirrors about flushed keys failed (will retry)")

    def _was_flushed(self, bk: BK) -> None:
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
        batches: dict[int, list[tuple[str, str, int, int]]] = defaultdict(list)
        done: list[tuple[BK, tuple[int, int, tuple[int, ...]]]] = []
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

    async def _send_drops(self, batches: dict[int, list[tuple[str, str, int, int]]]
                          ) -> set[int]:
        """Send the drops; the members that could not be told (those that are down are
        not tried: they are told once they are back)."""
        failed = set()
        for node, items in batches.items():
            if self.placement.down(node):
                failed.add(node)
                continue
            try:
                await self._peers[node].mirror_drop(items)
            except StorageError as exc:
                failed.add(node)
                log.warning("member %d did not drop %d flushed mirror copies (will "
                            "retry): %s", node, len(items), exc)
        return failed

    # -- return ------------------------------------------------------------------------
    async def claim(self, *, fresh: bool) -> None:
        """Take this member's keys back from the members that served or mirrored them
        while it was down (``fresh``: its data directory is new, so its unflushed writes,
        if any, exist only as mirror copies)."""
        me = self._ring.self_index
        nodes = list(self._peers)
        answers = await asyncio.gather(*(self._peers[n].claim() for n in nodes),
                                       return_exceptions=True)
        got: dict[int, ClaimAnswer] = {}
        for node, answer in zip(nodes, answers, strict=True):
            if isinstance(answer, BaseException):
                log.warning("member %d could not be asked for this member's keys: %s",
                            node, answer)
            else:
                got[node] = answer
        epoch = max([self.epoch_of(me)] + [a.epoch for a in got.values()]) + 1
        await self.store.raise_epoch(me, epoch)
        acted: set[BK] = set()
        for node, answer in got.items():
            taken = []
            for bucket, key in answer.acted:
                if not self._ring.owns(bucket, key):
                    continue
                acted.add((bucket, key))
                await self._cache.discard(bucket, key)  # older than what the node wrote
                await self._take_from(node, bucket, key, source="cache")
                taken.append((bucket, key))
            if taken:
                await self._peers[node].release(taken)
        stale: dict[int, list[tuple[str, str, int, int]]] = defaultdict(list)
        for node, answer in got.items():
            for item in answer.held:
                bk = (item.bucket, item.key)
                if not self._ring.owns(*bk):
                    continue
                if bk not in acted:
                    if fresh and self._cache.entry(*bk) is None:
                        await self._take_from(node, item.bucket, item.key, source="mirror")
                    else:
                        await self.replicate(item.bucket, item.key)
                # the key's state is now copied anew (a newer epoch) where it belongs
                stale[node].append((item.bucket, item.key, item.epoch, item.seq))
        await self._send_drops(stale)
        if got:
            log.warning("claimed this member's keys back (epoch %d): %d written by others "
                     "meanwhile", epoch, len(acted))

    async def _take_from(self, node: int, bucket: str, key: str, *, source: str) -> None:
        peer = self._peers[node]
        try:
            stream = await peer.held(bucket, key, source=source)
        except NoSuchKey:
            await self._install(bucket, key, None, None)
        else:
            async with stream:
                await self._install(bucket, key, stream.info, aiter(stream))
        await self.replicate(bucket, key)

    # -- listings ------------------------------------------------------------------------
    def down_copies(self, bucket: str, prefix: str = "", after: str = ""
                    ) -> list[tuple[str, ObjectInfo | None]]:
        """The mirror copies held here of keys whose owner is down, in the range, sorted
        by key (a deletion: None): what a listing must show for them until they are
        adopted (they are unflushed, acknowledged writes). Nothing to scan while every
        member is up."""
        down = {n for n in range(len(self.placement.members)) if self.placement.down(n)}
        if not down or not self.store.records:
            return []
        found = [(r.key, r.info) for r in list(self.store.records.values())
                 if r.owner in down and r.bucket == bucket and r.key > after
                 and r.key.startswith(prefix)]
        found.sort(key=lambda pair: pair[0])
        return found

    # -- the other side of the peer calls ----------------------------------------------
    async def answer_claim(self, node: int) -> ClaimAnswer:
        """Member ``node`` is back: it serves its keys from now on; what this member
        knows and holds of them."""
        self.placement.returned(node)
        self._acting.discard(node)
        return ClaimAnswer(epoch=self.epoch_of(node),
                           acted=sorted(self.store.acted.get(node, ())),
                           held=[HeldCopy(r.bucket, r.key, r.owner, r.epoch, r.seq, r.deleted)
                                 for r in self.store.held_for(node)])

    async def release(self, node: int, keys: list[BK]) -> None:
        """Member ``node`` took these keys back: forget this member's records of them."""
        for bucket, key in keys:
            self._pending.pop((bucket, key), None)
            await self._cache.discard(bucket, key)
        await self.store.forget_acted(node, keys)


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover
