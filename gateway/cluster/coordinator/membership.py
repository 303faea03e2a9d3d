"""The members as etcd says they are: registration, the watched ring, hand-off barriers.

**Registration.** A member registers its record under its lease
(:mod:`~gateway.cluster.coordinator.session`), create-only: a live registration of the same
name (another process, or this member's previous run whose lease has not expired yet) is
waited for until it ends. A member whose previous lease is still alive (a restart within
the TTL, with its data directory) takes it over: the ring never changed, its records are
still the newest. A member that starts with a new lease drops what it holds from before
(its cache records and mirror copies: the others served its keys from their copies since
its lease ended) unless it is *held*: it registered ``held/<id>`` because it may have
acknowledged writes nobody else has a copy of, and then its keys waited for it.

**The ring.** Every member watches the prefix. The view's members are the live
registrations and the held members; its revision is the etcd revision of the last change
to them.

**Barriers.** When the ring changes, the members hand over what they hold of keys that
moved (gateway/cluster/rebalance.py) and then write ``synced/<id>`` = the revision. A key
is served by its owner only once every member of the view has synced every view since
the last one in which this member already owned the key (or joined later): whatever the
old owners and the holders of copies had of it has arrived. Listings wait for all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import aetcd

from backends.core.errors import ServiceUnavailable, SlowDown
from gateway.background import BackgroundLoop
from gateway.cluster.coordinator.client import CoordinatorUnavailable, EtcdClient
from gateway.cluster.coordinator.keys import HELD, MEMBERS, SYNCED, Layout, Registration
from gateway.cluster.coordinator.session import Session
from gateway.cluster.coordinator.settings import CoordinatorSettings
from gateway.cluster.view import Member, View, member_id

log = logging.getLogger("squall.cluster")
#: how long a request waits for its key to be handed over before 503 SlowDown
ADMIT_WAIT_S = 10.0
#: how long a peer request signed under a newer view waits for this member to see it
CATCH_UP_S = 3.0
RETRY_AFTER_S = 1
#: how long a starting member waits for etcd (a new etcd cluster elects its leader)
START_WAIT_S = 120.0

ViewListener = Callable[[View], None]


@dataclass(slots=True)
class _Entry:
    registration: Registration
    created: int  # the etcd revision the key was created at


class EtcdMembership:
    """:class:`~gateway.cluster.view.Membership` kept in etcd, for one member."""

    def __init__(self, settings: CoordinatorSettings, me: Registration, replicas: int, *,
                 state_file: Path, client: EtcdClient | None = None) -> None:
        self.settings = settings
        self.me = me
        self.name = me.member.name
        self._replicas = replicas
        self.client = client or EtcdClient(settings, timeout_s=min(2.0, settings.lease_ttl_s / 3))
        self.session = Session(self.client, settings.lease_ttl_s)
        self.layout = Layout(settings.prefix)
        self._state_file = state_file
        self._live: dict[str, _Entry] = {}  # id -> live registration
        self._held: dict[str, _Entry] = {}  # id -> held record
        self._synced: dict[str, int] = {}  # id -> revision
        self._view = View(0, {}, self.name)
        self._fetched = 0  # the revision of the last read
        self._content: list[tuple[str, bool, float]] = []  # what the view was made of
        self._settled_view: View | None = None  # the newest view whose hand-offs ended
        self._pending: list[View] = []  # the views since, oldest first
        self._changed = asyncio.Event()
        self._listeners: list[ViewListener] = []
        self._loops: list[BackgroundLoop] = []
        self._holding = False
        self._hold_lock = asyncio.Lock()
        #: called with True when this member starts anew and must drop what it holds
        self.on_fresh: Callable[[], Awaitable[None]] | None = None
        self.left = False

    # -- the Membership protocol -------------------------------------------------------
    @property
    def view(self) -> View:
        return self._view

    @property
    def replicas(self) -> int:
        return self._replicas

    @property
    def holding(self) -> bool:
        """Whether this member is registered as held (see :meth:`hold`)."""
        return self._holding

    def serving(self) -> bool:
        return self.session.serving() and not self.left

    def registered_at(self, name: str) -> int | None:
        """The etcd revision the live registration of member ``name`` was created at
        (None: not registered now). A member that took its previous lease over keeps its
        registration; one that started anew made a new one: its writes of before are
        older than that revision."""
        entry = self._live.get(member_id(name))
        return entry.created if entry is not None else None

    async def wait_serving(self) -> None:
        """Return once this member may serve (registered, lease valid)."""
        while not self.serving():
            changed = self._changed
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), 0.2)

    def _refusal(self) -> SlowDown:
        return SlowDown("this cluster member cannot renew its lease in etcd (the "
                        "coordinator is unreachable from it) and serves no key meanwhile; "
                        "retry, or send the request to another member",
                        retry_after=RETRY_AFTER_S)

    def owned_since_settled(self, bucket: str, key: str) -> bool:
        """Whether this member owns the key in the newest settled view and every view
        since (nothing of it can be in transit to it)."""
        settled = self._settled_view
        return settled is not None and settled.owner(bucket, key) == self.name \
            and all(v.owner(bucket, key) == self.name for v in self._pending)

    @property
    def ownership_revisions(self) -> tuple[int, int]:
        """The revisions of the view and of the settled view: while they are the same,
        :meth:`owned_since_settled` answers the same for every key."""
        settled = self._settled_view
        return self._view.revision, settled.revision if settled is not None else 0

    async def admit(self, bucket: str, key: str) -> None:
        deadline = time.monotonic() + ADMIT_WAIT_S
        while True:
            if not self.serving():
                raise self._refusal()
            if self._view.owner(bucket, key) != self.name:
                raise ServiceUnavailable(f"{bucket}/{key} is owned by another cluster "
                                         "member now")
            if self.owned_since_settled(bucket, key):
                return
            await self._wait_change(deadline, f"{bucket}/{key} is being handed over between "
                                              "cluster members")

    async def _wait_change(self, deadline: float, what: str) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise SlowDown(f"{what}; retry in a moment", retry_after=RETRY_AFTER_S)
        changed = self._changed
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(changed.wait(), min(left, 0.5))

    async def view_changed(self, view: View) -> bool:
        """Wait (at most a lease's TTL, until the members whose lease ended are out of
        the view) for a view newer than ``view``; whether one came."""
        deadline = time.monotonic() + self.settings.lease_ttl_s + 1
        while self._view is view and time.monotonic() < deadline and self.serving():
            changed = self._changed
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(changed.wait(), 0.5)
        return self._view is not view

    async def catch_up(self, token: str) -> None:
        try:
            wanted = int(token)
        except ValueError:
            raise ServiceUnavailable("a peer request from a member without a coordinator "
                                     "(a static --peers list) reached a coordinated "
                                     "member") from None
        deadline = time.monotonic() + CATCH_UP_S
        while self._view.revision < wanted:
            await self._wait_change(deadline, "this member has not seen the newest cluster "
                                              "membership yet")

    async def quiescent(self, revision: int | None = None) -> int:
        deadline = time.monotonic() + ADMIT_WAIT_S
        while True:
            if not self.serving():
                raise self._refusal()
            current = self._view.revision
            if not self._pending and (revision is None or current >= revision):
                return current
            await self._wait_change(deadline, "cluster members are handing keys over; "
                                              "listings wait for it")

    def settled_keys(self) -> Mapping[str, int]:
        return {self._name_of(i): r for i, r in self._synced.items()}

    def _name_of(self, member: str) -> str:
        entry = self._live.get(member) or self._held.get(member)
        return entry.registration.member.name if entry else member

    def subscribe(self, listener: ViewListener) -> None:
        self._listeners.append(listener)

    # -- holding: this member may hold the only copy of acknowledged writes -------------
    async def hold(self) -> None:
        """Before acknowledging a write no other member keeps a copy of: this member
        stays in the ring even if its lease ends, so nobody serves its keys without it."""
        if self._holding:
            return
        async with self._hold_lock:
            if not self._holding:
                record = self.me.encode()
                await self.client.call(lambda c: c.put(self.layout.held(self.name), record))
                self._holding = True

    async def unhold(self) -> None:
        """Every write of this member has copies elsewhere again (or is flushed)."""
        if not self._holding:
            return
        async with self._hold_lock:
            if self._holding:
                await self.client.call(lambda c: c.delete(self.layout.held(self.name)))
                self._holding = False

    # -- start, watch, leave -----------------------------------------------------------
    async def start(self) -> None:
        """Read the cluster, register (or take the previous run's lease over), and keep
        both up to date from now on; return once this member is in its own view.

        Every view comes from an etcd event (a registration put, a lease ending, a held
        record), so every member has the same view at the same revision: the first read
        only starts the watch, which then brings this member's own registration."""
        revision = await self._first_read()
        await self._register()
        self._loops = [BackgroundLoop(lambda: self._watch(revision), "cluster-etcd-watch"),
                       self.session.keep_alive(self._lost)]
        for loop in self._loops:
            loop.start()
        deadline = time.monotonic() + 2 * self.settings.lease_ttl_s + 5
        while not (self._view.mine and self._view.revision > revision):
            await self._wait_change(deadline, "this member's registration did not come "
                                              "back from etcd")

    async def _first_read(self) -> int:
        """:meth:`_read`, waiting up to :data:`START_WAIT_S` for etcd to answer."""
        deadline = time.monotonic() + START_WAIT_S
        while True:
            try:
                return await self._read()
            except CoordinatorUnavailable as exc:
                if time.monotonic() > deadline:
                    raise CoordinatorUnavailable(
                        f"etcd ({self.settings.url}) did not answer for {START_WAIT_S:.0f} "
                        f"s: {exc}") from exc
                log.warning("waiting for etcd (%s): %s", self.settings.url, exc)
                await asyncio.sleep(1.0)

    async def _register(self) -> None:
        """Register under a live lease: this member's previous one if etcd still has it
        (the record is written again, so every member takes a new view), else a new
        one, after dropping what this member holds unless it is held."""
        key = self.layout.member(self.name)
        previous = self._saved_lease()
        current = await self._fetch()
        mine = current.get(key)
        if mine is not None and previous is not None and mine.lease == previous \
                and await self.session.resume(previous):
            self.me = replace(self.me, started=time.time())
            await self.client.call(lambda c: c.put(key, self.me.encode(), previous))
            log.info("took over this member's previous etcd lease %x: its keys never moved",
                     previous)
            return
        current = await self._wait_unregistered(key)
        self._holding = self.layout.held(self.name) in current
        if not self._holding and self.on_fresh is not None:
            await self.on_fresh()  # the others served its keys from their copies
        lease = await self.session.grant()
        record = self.me.encode()
        ok, _ = await self.client.call(lambda c: c.transaction(
            compare=[c.transactions.version(key) == 0],
            success=[c.transactions.put(key, record, lease)], failure=[]))
        if not ok:
            raise ServiceUnavailable(f"another process registered as {self.name} in etcd "
                                     "while this one started")
        self._save_lease(lease)
        log.info("registered in etcd as %s (lease %x)", self.name, lease)

    async def _wait_unregistered(self, key: bytes) -> dict[bytes, _KV]:
        """A registration of this name with another lease (this member's previous run,
        or another process): wait for it to end, at most about two TTLs. The keys then."""
        deadline = time.monotonic() + 2 * self.settings.lease_ttl_s + 2
        while True:
            current = await self._fetch()
            if key not in current:
                return current
            if time.monotonic() > deadline:
                raise ServiceUnavailable(
                    f"another process is registered in etcd as {self.name} (its lease is "
                    "alive): two members cannot have one URL; give each its own "
                    "--advertise-url")
            await asyncio.sleep(0.5)

    async def _fetch(self) -> dict[bytes, _KV]:
        """Every key of the cluster now (the state here is left alone)."""
        found = await self.client.call(lambda c: c.get_prefix(self.layout.prefix))
        self._fetched = int(found.header.revision)
        return {bytes(kv.key): _KV(bytes(kv.value), int(kv.lease), int(kv.create_revision),
                                   int(kv.mod_revision)) for kv in found}

    async def _read(self) -> int:
        """Rebuild the state from every key of the cluster; the revision read at."""
        kvs = await self._fetch()
        self._live, self._held, self._synced = {}, {}, {}
        for key, kv in kvs.items():
            self._apply(key, kv)
        self._recompute(self._fetched)
        return self._fetched

    def _ring_key(self, key: bytes) -> bool:
        kind = self.layout.kind(key)
        return kind is not None and kind[0] in (MEMBERS, HELD)

    def _apply(self, key: bytes, kv: _KV | None) -> None:
        kind = self.layout.kind(key)
        if kind is None:
            return
        what, member = kind
        if what == SYNCED:
            if kv is None:
                self._synced.pop(member, None)
            else:
                with contextlib.suppress(ValueError):
                    self._synced[member] = int(kv.value)
            return
        table = self._live if what == MEMBERS else self._held
        if kv is None:
            table.pop(member, None)
            return
        try:
            table[member] = _Entry(Registration.decode(kv.value), kv.created)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("ignoring an unreadable member record %r: %s", key, exc)

    async def _watch(self, revision: int) -> None:
        """Follow every change from ``revision`` on. A watch that breaks starts again
        from the last revision seen, so a change made meanwhile (a lease that expired)
        comes with its own revision, the same every member sees; only history compacted
        away makes it read the keys again."""
        while True:
            try:
                async for event in self.client.watch(self.layout.prefix, revision + 1):
                    kv = event.kv
                    revision = int(kv.mod_revision)
                    deleted = event.kind == "DELETE"
                    self._apply(bytes(kv.key), None if deleted else _KV(
                        bytes(kv.value), int(kv.lease), int(kv.create_revision), revision))
                    if self._ring_key(bytes(kv.key)):
                        self._recompute(revision)
                    else:
                        self._settle()
            except CoordinatorUnavailable as exc:
                log.debug("watching etcd again: %s", exc)
                await asyncio.sleep(0.2)
                if isinstance(exc.__cause__, aetcd.RevisionCompactedError):
                    with contextlib.suppress(CoordinatorUnavailable):
                        revision = await self._reread()
            except Exception:
                log.exception("watching etcd failed; reading it again")
                await asyncio.sleep(1.0)

    async def _reread(self) -> int:
        """The history this member missed was compacted away: read the keys again, and
        write this member's record again so that every member takes a new view at one
        revision (a view read here would not be one the others have)."""
        revision = await self._read()
        lease = self.session.lease
        if lease is not None and self._view.mine:
            self.me = replace(self.me, started=time.time())
            await self.client.call(lambda c: c.put(self.layout.member(self.name),
                                                   self.me.encode(), lease))
        return revision

    def _recompute(self, revision: int) -> None:
        """A new view at ``revision`` if the ring's content changed: its members, which
        of them are held, and their records (a member writes its record again to make
        every member take a new view). Every member computes the same from the same
        events, so views are the same everywhere at the same revision."""
        members: dict[str, Member] = {}
        content = []
        for member, entry in self._held.items():
            if member not in self._live:
                m = entry.registration.member
                members[m.name] = Member(m.name, m.host, m.worker, m.workers, held=True)
                content.append((m.name, True, entry.registration.started))
        for entry in self._live.values():
            m = entry.registration.member
            members[m.name] = m
            content.append((m.name, False, entry.registration.started))
        content.sort()
        if content == self._content and self._view.revision:
            self._settle()
            return
        self._content = content
        self._view = View(revision, members, self.name)
        self._pending.append(self._view)
        log.info("cluster membership at revision %d: %s", revision,
                 ", ".join(sorted(members)) or "none")
        self._settle()
        for listener in self._listeners:
            listener(self._view)

    def _created(self, member: str) -> int:
        entry = self._live.get(member) or self._held.get(member)
        return entry.created if entry is not None else 0

    def _settle(self) -> None:
        """Move the settled view as far as the members' syncs allow: a view is settled
        once every member of the current view has synced it (or joined after it)."""
        ids = [m.id for m in self._view.members.values()]

        def synced(revision: int) -> bool:
            return all(self._synced.get(i, 0) >= revision or self._created(i) > revision
                       for i in ids)
        done = [i for i, v in enumerate(self._pending) if synced(v.revision)]
        if done:
            last = done[-1]  # (a later view synced means every earlier one is)
            self._settled_view = self._pending[last]
            del self._pending[:last + 1]
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def synced(self, revision: int) -> None:
        """This member has handed over everything that moved away from it at ``revision``."""
        if not self.serving():
            return
        await self.client.call(lambda c: c.put(self.layout.synced(self.name),
                                               str(revision).encode()))

    async def _lost(self) -> None:
        """The lease expired: this member serves nothing until it has registered again,
        as a new member (the others hold its keys' newest state now)."""
        while not self.left:
            try:
                await self._register()
                return
            except (CoordinatorUnavailable, ServiceUnavailable) as exc:
                log.warning("registering in etcd again failed (%s); retrying", exc)
                await asyncio.sleep(self.session.interval_s)

    async def leave(self) -> None:
        """Leave the cluster: serve nothing more, end the lease (the others take the keys
        over from their copies and what this member handed them), forget the sync."""
        self.left = True
        with contextlib.suppress(CoordinatorUnavailable):
            await self.session.revoke()
            await self.client.call(lambda c: c.delete(self.layout.synced(self.name)))
            if self._holding:
                await self.unhold()
        self._clear_lease()

    async def stop(self) -> None:
        for loop in self._loops:
            await loop.stop()
        await self.client.aclose()

    # -- the lease id kept across restarts ---------------------------------------------
    def _saved_lease(self) -> int | None:
        try:
            data = json.loads(self._state_file.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("name") != self.name:
            return None
        lease = data.get("lease")
        return lease if isinstance(lease, int) else None

    def _save_lease(self, lease: int) -> None:
        tmp = self._state_file.with_suffix(".tmp")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"name": self.name, "lease": lease}))
        with open(tmp) as f:
            os.fsync(f.fileno())
        os.replace(tmp, self._state_file)

    def _clear_lease(self) -> None:
        with contextlib.suppress(OSError):
            self._state_file.unlink()


@dataclass(frozen=True, slots=True)
class _KV:
    value: bytes
    lease: int
    created: int
    mod: int
