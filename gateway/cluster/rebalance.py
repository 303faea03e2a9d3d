"""What a member does when the membership view changes: hand over the keys that moved.

For the newest view (intermediate ones need nothing of their own: what is handed over is
the state now), while this member's lease is valid:

1. every record of its cache whose key it no longer owns is handed to the key's owner:
   its state if unflushed, else a mark that the backend has it, sent once the writes
   under way have ended and no flush of it is in flight
   (:meth:`~gateway.cluster.replication.Replication.hand_over`); then forgotten;
2. every copy it holds whose sender no longer owns the key (the sender moved it, left, or
   lost its lease) goes to the key's owner, unless that is this member, which adopts it;
   so does a copy whose sender registered anew since it was made (it came back after
   its lease ended, and dropped what it held then: the copy is the key's newest state);
3. it writes ``synced/<id>`` = the view's revision: the owners of the keys that moved
   serve them once every member has (gateway/cluster/coordinator/membership.py);
4. its own dirty keys whose mirrors changed are copied to the new mirrors.

A send that fails is tried again (every second) until it succeeds or a newer view makes
it moot; the barrier waits meanwhile, so a key is never served before its newest state
has reached its owner. Nothing of this touches the keys that did not move: requests for
them go on as before.
"""

from __future__ import annotations

import asyncio
import logging

from backends.core.errors import StorageError
from gateway.background import BackgroundLoop
from gateway.cache.cluster_view import ClusterView
from gateway.cache.keyguard import WriteGuard
from gateway.cluster.coordinator.membership import EtcdMembership
from gateway.cluster.replication import Replication
from gateway.cluster.view import View

log = logging.getLogger("squall.cluster")
RETRY_S = 1.0
_YIELD_EVERY = 512  # keys looked at between two yields to the event loop


class Rebalancer:
    """Hands over this member's part of every membership change (see the module)."""

    def __init__(self, membership: EtcdMembership, cache: ClusterView | None,
                 replication: Replication | None, guard: WriteGuard) -> None:
        self._membership = membership
        self._cache = cache
        self._replication = replication
        self._guard = guard
        self._wake = asyncio.Event()
        self._loop = BackgroundLoop(self._run, "cluster-rebalance")
        self.done = 0  # the newest revision handed over
        membership.subscribe(lambda _view: self._wake.set())

    def start(self) -> None:
        self._wake.set()
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            membership = self._membership
            view = membership.view
            if not membership.serving() or not view.mine:
                await asyncio.sleep(RETRY_S)  # fenced, or not registered yet
                self._wake.set()
                continue
            try:
                complete = await self._hand_over(view)
                if complete and membership.view is view:
                    await membership.synced(view.revision)
                    self.done = view.revision
                    if self._replication is not None:
                        await self._replication.remirror()
                elif not complete:
                    await asyncio.sleep(RETRY_S)
            except StorageError as exc:
                log.warning("handing keys over for membership revision %d failed (will "
                            "retry): %s", view.revision, exc)
                await asyncio.sleep(RETRY_S)
                complete = False
            if not complete or membership.view is not view:
                self._wake.set()

    def _orphaned(self, sender: str, epoch: int) -> bool:
        """Whether a copy ``sender`` made under the view of revision ``epoch`` is of an
        earlier run of it: it registered anew since (its lease had ended, and it dropped
        what it held), so the copy goes to it like a copy of a key that moved."""
        registered = self._membership.registered_at(sender)
        return registered is not None and registered > epoch

    async def _hand_over(self, view: View) -> bool:
        """This member's hand-over for ``view``; False if something is left to retry."""
        complete = True
        moved = copies = 0
        replication = self._replication
        if replication is None:  # no cache: nothing unflushed to hand over
            return True
        if self._cache is not None:
            for index, (bucket, key) in enumerate(self._cache.held_keys()):
                if index % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                if self._membership.view is not view:
                    return False  # a newer view: start over with it
                owner = view.owner(bucket, key)
                if owner == view.me or owner is None:
                    continue
                try:
                    async with self._guard.exclusive((bucket, key)):
                        if self._membership.view.owns(bucket, key):
                            continue  # it came back meanwhile
                        await replication.hand_over(bucket, key, owner)
                        moved += 1
                except StorageError as exc:
                    complete = False
                    log.info("handing %s/%r over to %s failed (will retry): %s", bucket, key,
                             owner, exc)
        for record in list(replication.store.records.values()):
            owner = view.owner(record.bucket, record.key)
            if owner is None or owner == view.me or (
                    owner == record.owner and not self._orphaned(record.owner, record.epoch)):
                continue
            try:
                await replication.pass_on(record, owner)
                copies += 1
            except StorageError as exc:
                complete = False
                log.info("passing the copy of %s/%r on to %s failed (will retry): %s",
                         record.bucket, record.key, owner, exc)
        if moved or copies:
            log.info("membership revision %d: handed %d keys and %d copies over",
                     view.revision, moved, copies)
        return complete
