"""Live membership: members join and leave while the others keep running.

One member (the *coordinator*: the one the admin's ``POST /_squall/cluster/members``
reached) runs a change in three phases over the peer protocol
(``POST /_squall/peer/membership?phase=...``), to every member of the old list and the
joining one:

1. ``freeze``: a member holds new client requests (S3 requests without a peer marker)
   and waits until the client requests it was serving have ended (with them, every
   forwarded request and peer call they made). Once every member answered, nothing
   writes a key anywhere.
2. ``handoff``: each member drops its clean records of the keys it loses under the new
   list and flushes its unflushed ones first, and answers once they are on the backend.
   With mirrored write-back it flushes *every* unflushed record: mirror copies, epochs
   and claims name members by node id, which the change renumbers, so nothing may need
   a mirror across it.
3. ``purge`` (mirrored write-back): each member drops its mirror copies, all of them
   garbage now (their keys are flushed everywhere).
4. ``commit``: each member saves ``{version, members}`` in its data directory, switches
   to the new list (ring, peer ids, health; with mirrored write-back its epochs and keys
   acted for restart from nothing), and lets the held requests go, now routed by the new
   list. A peer request signed for the new list that reaches a member not yet switched
   waits for its commit instead of being refused.

A failure in phases 1 to 3 aborts the change everywhere (the old list stays). A member
removed while it is down takes no part: with mirrored write-back a ``gather`` phase comes
before the hand-off, in which the others send their copies of its keys to each key's
stand-in, which adopts and flushes the newest at the hand-off; it drops what it holds if
it comes back (:meth:`Membership.removed_while_away`). See docs/cluster.md, "Live
membership" and "Removing a member that is down".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from backends.errors import ServiceUnavailable
from gateway.cluster.lost_member import drop_stale, is_down, removal_seen
from gateway.cluster.remote import PeerClient
from gateway.cluster.ring import fingerprint, normalize_url, owner_index
from gateway.s3api.errors import InvalidArgument

if TYPE_CHECKING:
    from gateway.cluster.node import ClusterNode

log = logging.getLogger("squall.cluster")

#: how long a client request waits for a change to end before it is refused (503)
HOLD_TIMEOUT_S = 60.0
#: how long a frozen member waits for the commit before it lifts the freeze itself
FREEZE_TIMEOUT_S = 120.0
#: how long a member waits for its serving requests, and its hand-off flush, to end
DRAIN_TIMEOUT_S = 30.0
HANDOFF_TIMEOUT_S = 300.0


def load(path: Path | None, base: tuple[str, ...]) -> tuple[int, tuple[str, ...]] | None:
    """The saved ``(version, members)`` of the last change this member committed, if it
    was started with the same ``--peers`` (``base``) then; a new ``--peers`` is a new
    static configuration and wins."""
    if path is None or not path.exists():
        return None
    data = json.loads(path.read_text())
    if tuple(data.get("base", ())) != base:
        log.warning("--peers changed since the last live membership change: the member "
                    "list saved in %s is dropped", path)
        path.unlink()
        return None
    return int(data["version"]), tuple(str(m) for m in data["members"])


def save(path: Path, version: int, members: tuple[str, ...], base: tuple[str, ...]) -> None:
    """Durably (fsync, rename, directory fsync)."""
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        json.dump({"version": version, "members": list(members), "base": list(base)}, f)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Membership:
    """This member's side of live membership changes: the gate of client requests, the
    phases a coordinator asks for, and the coordinator itself."""

    def __init__(self, node: ClusterNode, *, version: int, path: Path | None,
                 joining: bool, base: tuple[str, ...]) -> None:
        self._node = node
        self.version = version
        #: the --peers list this member was started with: members adopt versions only
        #: from members started with the same one
        self.base = base
        self.base_id = fingerprint(base)
        self._path = path
        #: open: client requests are served; closed while frozen, joining or left
        self.gate = asyncio.Event()
        self.joining = joining
        self.left = False
        #: once left: the member list that removed this member (its client requests go
        #: to those members)
        self.successors: tuple[str, ...] = ()
        if not joining:
            self.gate.set()
        self.serving = 0  # client requests being served now
        self.pending: tuple[int, tuple[str, ...]] | None = None
        self.pending_id: str | None = None
        self._committed = asyncio.Event()
        self._lock = asyncio.Lock()
        self._thaw: asyncio.TimerHandle | None = None
        self._handed_off = False  # the pending change's hand-off is done here
        self._tasks: set[asyncio.Task[None]] = set()
        self._lost: int | None = None  # a member the pending change removes while down

    # -- the gate (ClusterGateway) -----------------------------------------------------
    def refusal(self) -> str | None:
        """Why client requests are refused for good here, None when they may wait."""
        if self.left:
            return ("this member has left the cluster; send requests to the members "
                    "GET /_squall/cluster lists on another member")
        if self.joining and self.pending is None:
            return ("this member has not joined the cluster yet (squall cluster add "
                    f"{self._node.ring.self_url} --endpoint <a member>)")
        return None

    async def wait_open(self) -> None:
        """Return once client requests are served again; ServiceUnavailable otherwise."""
        deadline = time.monotonic() + HOLD_TIMEOUT_S
        while not self.gate.is_set():
            reason = self.refusal()
            if reason is not None:
                raise ServiceUnavailable(reason)
            try:
                await asyncio.wait_for(self.gate.wait(), min(1.0, deadline - time.monotonic()))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise ServiceUnavailable("the cluster's member list is changing; "
                                             "try again") from None

    async def wait_committed(self, ring_id: str) -> None:
        """A peer request signed for the list being committed: wait for our commit."""
        deadline = time.monotonic() + HOLD_TIMEOUT_S  # then: the mismatch answer
        committed = self._committed
        if self.pending_id == ring_id:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(committed.wait(), deadline - time.monotonic())

    # -- the phases (peer protocol) ----------------------------------------------------
    async def handle(self, request: Request) -> Response:
        """``POST /_squall/peer/membership?phase=freeze|handoff|purge|commit|abort``."""
        phase = request.query_params.get("phase", "")
        try:
            data = json.loads(await request.body())
            version = int(data["version"])
            members = tuple(normalize_url(str(m)) for m in data["members"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgument(f"malformed membership request: {exc}") from None
        # (only these phases use it: a commit sent again finds the new list here)
        lost = self._lost_index(data.get("lost")) if phase in ("gather", "handoff") else None
        if phase == "freeze":
            await self.freeze(version, members, int(data.get("from", -1)))
        elif phase == "gather":
            await self.gather(version, members, lost)
        elif phase == "handoff":
            await self.handoff(version, members, lost)
        elif phase == "purge":
            await self.purge(version, members)
        elif phase == "commit":
            await self.commit(version, members)
        elif phase == "abort":
            self.abort(version)
        else:
            raise InvalidArgument(f"no membership phase {phase!r}")
        return Response(b"null", media_type="application/json")

    async def freeze(self, version: int, members: tuple[str, ...], current: int) -> None:
        if self.pending is not None and self.pending[0] != version:
            raise ServiceUnavailable("another membership change is under way; try again")
        if not self.joining and current != self.version:
            raise ServiceUnavailable(f"membership version {current} is not this member's "
                                     f"({self.version}): another change came first")
        if version <= self.version:
            raise ServiceUnavailable(f"membership version {version} is not newer than "
                                     f"{self.version}")
        if self.pending is None:
            self._committed = asyncio.Event()
            self._handed_off = False
        self.pending, self.pending_id = (version, members), fingerprint(members)
        self.gate.clear()
        self._thaw_later()
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self.serving and time.monotonic() < deadline:  # noqa: ASYNC110  a counter
            await asyncio.sleep(0.01)
        if self.serving:
            self.abort(version)
            raise ServiceUnavailable(f"{self.serving} requests were still being served "
                                     f"after {DRAIN_TIMEOUT_S:.0f} s")

    def _lost_index(self, url: object) -> int | None:
        """The node id of the member a change removes while it is down (None: none)."""
        if url is None:
            return None
        try:
            return self._node.ring.members.index(normalize_url(str(url)))
        except ValueError:
            raise InvalidArgument(f"{url} is not a member") from None

    async def gather(self, version: int, members: tuple[str, ...], lost: int | None) -> None:
        """The removal of a member that is down, mirrored write-back: it counts as down
        here whatever health last found (the coordinator probed it), and the mirror
        copies of its keys held here go to the member that stands in for each key."""
        self._check_pending(version, members)
        replication = self._node.replication
        if lost is None or replication is None:
            return
        self._mark_lost(lost)
        sent = await replication.hand_over(lost)
        log.warning("cluster membership %d: member %d is removed while down; %d mirror "
                    "copies of its keys handed to the members that stand in for them",
                    version, lost, sent)

    def _mark_lost(self, lost: int) -> None:
        """Member ``lost`` counts as down here until the change ends."""
        self._lost = lost
        self._node.placement.lost.add(lost)

    async def handoff(self, version: int, members: tuple[str, ...],
                      lost: int | None = None) -> None:
        self._check_pending(version, members)
        node = self._node
        if lost is not None and node.replication is not None:
            # Every copy of the lost member's keys is with its stand-in now: adopted, it
            # is an unflushed record, flushed below with every other one.
            self._mark_lost(lost)
            adopted, dropped = await node.replication.take_over(lost)
            log.warning("cluster membership %d: %d mirror copies of member %d's keys "
                        "taken over, %d older than this member's own writes dropped",
                        version, adopted, lost, dropped)
        me = node.ring.self_url
        index = members.index(me) if me in members else None

        def owns(bucket: str, key: str) -> bool:
            return index is not None and owner_index(members, bucket, key) == index

        cache = node.cache
        if cache is None or self.joining:
            self._handed_off = True
            return
        dropped, hurried = await cache.hand_off(owns)
        # Mirrored: every unflushed record goes (its mirrors are named by node id).
        def moves(bucket: str, key: str) -> bool:
            return node.replicated or not owns(bucket, key)

        log.warning("cluster membership %d: %d clean records of keys that move dropped, %d "
                    "unflushed ones being flushed%s", version, dropped, hurried,
                    " (and every other unflushed one: mirrored write-back)"
                    if node.replicated else "")
        await self._flush(moves, "of keys that move" if not node.replicated else "")
        self._handed_off = True

    async def purge(self, version: int, members: tuple[str, ...]) -> None:
        """Mirrored write-back: every member has flushed everything; drop the copies."""
        self._check_pending(version, members)
        replication = self._node.replication
        if replication is None:
            return
        if self._node.cache is not None:  # (a record a background task made since)
            await self._flush(lambda bucket, key: True, "")
        dropped = await replication.purge()
        log.warning("cluster membership %d: %d mirror copies of flushed writes dropped",
                    version, dropped)

    async def _flush(self, which: Callable[[str, str], bool], what: str) -> None:
        """Flush the unflushed records ``which`` accepts, first; return once none is left."""
        node = self._node
        cache = node.cache
        assert cache is not None
        deadline = time.monotonic() + HANDOFF_TIMEOUT_S
        buckets = [b.name for b in await node.local.list_buckets()]
        hurried: set[tuple[str, str]] = set()
        while True:
            left = [e for b in buckets for e in cache.dirty_snapshot(b)
                    if which(e.bucket, e.key)]
            if not left:
                return
            for bk in _new(hurried, ((e.bucket, e.key) for e in left)):
                cache.expedite(*bk)
            if time.monotonic() > deadline:
                raise ServiceUnavailable(f"{len(left)} unflushed records {what}"
                                         f"{' ' if what else ''}were not flushed in "
                                         f"{HANDOFF_TIMEOUT_S:.0f} s")
            self._thaw_later()
            await asyncio.sleep(0.05)

    async def commit(self, version: int, members: tuple[str, ...], *,
                     claim: bool = False) -> None:
        """Switch to the new list. ``claim``: this member adopts a change the others
        committed without it (it was down meanwhile), so they may have acted for its
        keys under the new list: it claims them back before it serves anything."""
        if self.pending is None and version == self.version and (
                self.left or members == self._node.ring.members):
            return  # committed already (a commit sent again)
        self._check_pending(version, members)
        node = self._node
        me = node.ring.self_url
        if self._path is not None:
            save(self._path, version, members, self.base)
        self.version = version
        replication = node.replication
        if me in members:
            if replication is None:
                node.apply(members, members.index(me))
            else:
                async with replication.paused():
                    node.apply(members, members.index(me))
                    await replication.purge(ring_id=node.ring.id)
                # Held peer requests signed for the new list wait until _clear().
                if claim:
                    await replication.claim(fresh=False)
            self.joining = False
            self.gate.set()
        else:
            self.left = True
            await node.health.stop()  # the members are no longer ours to check
            if replication is not None:
                async with replication.paused():
                    await replication.purge(ring_id=fingerprint(members))
            node.depart(members)
        self._clear()
        log.warning("cluster membership %d committed: %s%s", version, ", ".join(members),
                    "" if me in members else " (this member has left)")

    def abort(self, version: int) -> None:
        if self.pending is not None and self.pending[0] == version:
            log.warning("cluster membership change %d aborted", version)
            if self._lost is not None:  # health decides again
                self._node.placement.lost.discard(self._lost)
                self._lost = None
            self._clear()
            if not self.joining and not self.left:
                self.gate.set()

    def _check_pending(self, version: int, members: tuple[str, ...]) -> None:
        if self.pending != (version, members):
            raise ServiceUnavailable(f"membership change {version} is not pending here "
                                     "(it was aborted or never frozen)")

    def _clear(self) -> None:
        self.pending = self.pending_id = None
        self._lost = None  # (a commit renumbered the members: placement forgot it)
        self._committed.set()
        if self._thaw is not None:
            self._thaw.cancel()
            self._thaw = None

    def _thaw_later(self) -> None:
        """Lift the freeze if the coordinator goes silent (it died mid-change) before
        this member handed its keys off; after that, only a commit or an abort (or a
        member that heard of the commit, :meth:`heard`) ends it."""
        if self._thaw is not None:
            self._thaw.cancel()
        pending = self.pending
        if pending is not None:
            self._thaw = asyncio.get_running_loop().call_later(
                FREEZE_TIMEOUT_S, self._silent, pending[0])

    def _silent(self, version: int) -> None:
        if not self._handed_off:
            self.abort(version)
        else:
            log.error("cluster membership change %d: no commit or abort from its "
                      "coordinator; this member waits (it has handed its keys off)", version)

    # -- spreading: a member that missed a commit adopts it ------------------------------
    def heard(self, version: int, members: tuple[str, ...], base_id: object) -> None:
        """A member reported membership ``version`` (health checks): adopt a newer one
        (a commit this member missed: it was down, or its coordinator died)."""
        if version <= self.version or self._tasks or self.left or self.joining \
                or base_id != self.base_id:
            return
        task = asyncio.get_running_loop().create_task(self._adopt(version, members))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _adopt(self, version: int, members: tuple[str, ...]) -> None:
        try:
            members = tuple(normalize_url(m) for m in members)
            log.warning("cluster membership %d heard from a member: adopting it", version)
            if self.pending != (version, members):
                if self.pending is None:
                    self._committed = asyncio.Event()
                self.pending, self.pending_id = (version, members), fingerprint(members)
                self._handed_off = False
                self.gate.clear()
                deadline = time.monotonic() + DRAIN_TIMEOUT_S
                while self.serving and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
                if self._node.ring.self_url in members:
                    await self.handoff(version, members)
                    await self.purge(version, members)
                else:
                    await drop_stale(self._node, version)
            await self.commit(version, members, claim=True)
        except Exception:
            log.exception("adopting cluster membership %d failed", version)

    # -- a member removed while it was away ----------------------------------------------
    async def removed_while_away(self) -> bool:
        """At start, before serving or flushing anything of the cluster's: if the other
        members report a newer member list (same ``--peers``) without this member, it
        was removed while it was down: it drops what it holds and leaves (True)."""
        seen = await removal_seen(self._node, self.version, self.base_id)
        if seen is None:
            return False
        version, members = seen
        self._committed = asyncio.Event()
        self.pending, self.pending_id = (version, members), fingerprint(members)
        self.gate.clear()
        await drop_stale(self._node, version)
        await self.commit(version, members)
        return True

    # -- the coordinator (admin call) --------------------------------------------------
    async def change(self, action: str, url: str, *, force: bool = False) -> dict[str, Any]:
        """Add or remove member ``url`` (``action`` "add" or "remove"); the new view.
        InvalidArgument for a bad request, ServiceUnavailable if a member failed.

        A member removed while it is down (health found it down and it does not answer
        a probe now) is left out of the phases; with mirrored write-back the others
        flush its acknowledged writes from their copies first. Without copies (R = 1)
        its unflushed writes would be lost: refused unless ``force``."""
        try:
            member = normalize_url(url)
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
        node = self._node
        if node.ring.workers > 1:
            raise InvalidArgument("members that run --workers N are not added or removed "
                                  "live: stop every member, then start them all with the "
                                  "new --peers (docs/workers.md)")
        if node.transport.local_workers:
            raise InvalidArgument("the workers of --workers N are not a cluster whose "
                                  "members can change")
        if self.joining or self.left:
            raise InvalidArgument(self.refusal() or "not a member")
        async with self._lock:
            old = node.ring.members
            if action == "add":
                if member in old:
                    raise InvalidArgument(f"{member} is already a member")
                new = (*old, member)
            elif action == "remove":
                if member not in old:
                    raise InvalidArgument(f"{member} is not a member ({', '.join(old)})")
                if len(old) == 1:
                    raise InvalidArgument("cannot remove the last member of the cluster")
                new = tuple(m for m in old if m != member)
            else:
                raise InvalidArgument(f"action must be add or remove, not {action!r}")
            lost = member if action == "remove" and await is_down(node, member) else None
            if lost is not None and not node.replicated and not force:
                raise ServiceUnavailable(
                    f"member {lost} is down: without mirror copies (--dirty-replicas 1) "
                    "its unflushed writes would be lost; bring it back and remove it, or "
                    "remove it with --force to accept the loss")
            version = self.version + 1
            change = {"version": version, "members": list(new), "from": self.version,
                      "lost": lost}
            calls = [c for c in self._calls(old, new, member if action == "add" else None)
                     if c[0] != lost]
            phases = ("freeze", "gather", "handoff", "purge") if lost is not None \
                else ("freeze", "handoff", "purge")
            if lost is not None:
                log.warning("membership %d: member %s is down: it is removed without its "
                            "part in the change%s", version, lost,
                            "" if node.replicated else " (its unflushed writes are lost)")
            for phase in phases:
                failed = await _run(calls, phase, change)
                if failed:
                    await _run(calls, "abort", change)
                    raise ServiceUnavailable(f"membership change {version} aborted, the "
                                             f"member list is unchanged: {failed}")
            others = [c for c in calls if c[0] != node.ring.self_url]
            failed = await _run(others, "commit", change)
            await self.commit(version, new)
            if failed:
                log.error("membership %d: commit not confirmed by %s (retrying)", version,
                          failed)
                task = asyncio.get_running_loop().create_task(
                    _retry_commit(others, change))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return {"version": version, "members": list(new),
                    "unconfirmed": failed or None}

    def _calls(self, old: tuple[str, ...], new: tuple[str, ...], joining: str | None
               ) -> list[tuple[str, Callable[[str, dict[str, Any]], Any]]]:
        node = self._node
        calls: list[tuple[str, Callable[[str, dict[str, Any]], Any]]] = []
        for index, url in enumerate(old):
            if index == node.ring.self_index:
                calls.append((url, self._local))
            else:
                calls.append((url, PeerClient(node.transport, index).membership))
        if joining is not None:
            index = new.index(joining)
            node.transport.set_members(new, node.ring.self_index)
            client = PeerClient(node.transport, index, ring_id=fingerprint(new))
            calls.append((joining, client.membership))
        return calls

    async def _local(self, phase: str, change: dict[str, Any]) -> None:
        version, members = int(change["version"]), tuple(change["members"])
        lost = self._lost_index(change.get("lost")) if phase in ("gather", "handoff") \
            else None
        if phase == "freeze":
            await self.freeze(version, members, int(change["from"]))
        elif phase == "gather":
            await self.gather(version, members, lost)
        elif phase == "handoff":
            await self.handoff(version, members, lost)
        elif phase == "purge":
            await self.purge(version, members)
        elif phase == "commit":
            await self.commit(version, members)
        else:
            self.abort(version)


async def _retry_commit(calls: list[tuple[str, Callable[[str, dict[str, Any]], Any]]],
                        change: dict[str, Any], attempts: int = 600) -> None:
    """Send the commit again, every second, to the members that have not confirmed it."""
    for _ in range(attempts):
        await asyncio.sleep(1.0)
        results = await asyncio.gather(*(call("commit", change) for _, call in calls),
                                       return_exceptions=True)
        calls = [c for c, r in zip(calls, results, strict=True)
                 if isinstance(r, BaseException)]
        if not calls:
            return


async def _run(calls: list[tuple[str, Callable[[str, dict[str, Any]], Any]]], phase: str,
               change: dict[str, Any]) -> str:
    """Run one phase on every member at once; a description of the failures, or ""."""
    results = await asyncio.gather(*(call(phase, change) for _, call in calls),
                                   return_exceptions=True)
    failed = [f"{url}: {result}" for (url, _), result in zip(calls, results, strict=True)
              if isinstance(result, BaseException)]
    return "; ".join(failed)


def _new(seen: set[tuple[str, str]], items: Iterable[tuple[str, str]]
         ) -> list[tuple[str, str]]:
    """The items not in ``seen``, which now holds them too."""
    fresh = [bk for bk in items if bk not in seen]
    seen.update(fresh)
    return fresh
