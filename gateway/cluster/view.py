"""Who the members are now and who owns a key: the membership view.

A :class:`View` is immutable: the ring's members (each with the URL it is reached at and
its host), this member's name, and the revision the view was taken at. Ownership is
rendezvous hashing (:mod:`gateway.cluster.ring`) over the members: a key's *preference
list* orders the hosts by their weight for the key; on each host the key belongs to one
worker (``worker_index``), so the list names one member per host that runs that worker.
The first is the key's owner; the next ones that run on other hosts keep mirror copies.

With a coordinator (etcd) the view changes as members register and their leases end;
its revision is the etcd revision of the last change, the epoch of every write served
under it. A static member list (``--peers``) is one view that never changes (revision 0).

:class:`Membership` is what the rest of the cluster layer asks: the current view, whether
this member may serve a key now (its lease is valid and every member has handed the key
over), and the quiescent points listings are taken at.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gateway.cluster.ring import Ring, routing_key, weight, worker_index

#: the view token of a static member list starts with this (then its ring id)
STATIC = "s"
#: keys whose owner and mirrors a view remembers (then it forgets them all and starts
#: again): a request asks for them several times (forwarding, storage, mirroring)
MEMO_KEYS = 1 << 12  # (keys of up to 1 KiB: a few MB per view at most)
_UNSET = object()


@functools.lru_cache(maxsize=1024)
def member_id(name: str) -> str:
    """A member's short id: what peer markers name it by (its name holds ``:``)."""
    return hashlib.blake2b(name.encode("utf-8"), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class Member:
    """One ring member: a host, or one worker of a host running ``--workers N``."""

    name: str  # the host URL, or "<host URL>/worker-<k>"
    host: str  # the host URL: where it is reached, and what its copies avoid
    worker: int = 0
    workers: int = 1
    #: in the ring without a live lease: it may hold the only copy of unflushed writes,
    #: so its keys wait for it (docs/cluster.md, "Held members")
    held: bool = False

    @property
    def id(self) -> str:
        return member_id(self.name)

    @classmethod
    def of(cls, host: str, worker: int, workers: int, *, held: bool = False) -> Member:
        name = host if workers == 1 else f"{host}/worker-{worker}"
        return cls(name, host, worker, workers, held)


@dataclass(frozen=True, slots=True)
class View:
    """The members at ``revision``; ``me`` is this member's name (it may be absent: a
    member whose lease ended, or one that left)."""

    revision: int
    members: Mapping[str, Member]
    me: str
    #: the hosts, each with its members by worker index (derived)
    _hosts: dict[str, dict[int, Member]] = field(init=False, repr=False, compare=False)
    _by_id: dict[str, str] = field(init=False, repr=False, compare=False)
    #: owners and mirror lists computed under this view (a view never changes)
    _owners: dict[tuple[str, str], str | None] = field(init=False, repr=False,
                                                       compare=False)
    _mirrors: dict[tuple[str, str, int], tuple[str, ...]] = field(init=False, repr=False,
                                                                  compare=False)

    def __post_init__(self) -> None:
        hosts: dict[str, dict[int, Member]] = {}
        for member in self.members.values():
            hosts.setdefault(member.host, {})[member.worker] = member
        object.__setattr__(self, "_hosts", hosts)
        object.__setattr__(self, "_by_id", {m.id: m.name for m in self.members.values()})
        object.__setattr__(self, "_owners", {})
        object.__setattr__(self, "_mirrors", {})

    @classmethod
    def static(cls, ring: Ring) -> View:
        """The one view of a static member list (``--peers``, or a host's workers)."""
        members = {}
        for index, name in enumerate(ring.members):
            host = ring.url_of(index)
            members[name] = Member(name, host, index % ring.workers, ring.workers)
        return cls(0, members, ring.self_url)

    @property
    def token(self) -> str:
        """What a peer marker says of the view it was signed under."""
        return str(self.revision) if self.revision else STATIC + _fingerprint(self.members)

    @property
    def mine(self) -> bool:
        """Whether this member is in the view."""
        return self.me in self.members

    def name_of(self, member: str) -> str | None:
        """The name of the member with id ``member`` (None: not in this view)."""
        return self._by_id.get(member)

    def others(self) -> list[str]:
        return [name for name in self.members if name != self.me]

    def preference(self, bucket: str, key: str) -> list[str]:
        """The members the key may live on, owner first: one per host (the worker the
        key belongs to there), hosts by their rendezvous weight for the key."""
        rkey = routing_key(key)
        ranked = []
        for host, workers in self._hosts.items():
            count = next(iter(workers.values())).workers
            member = workers.get(worker_index(count, bucket, key) if count > 1 else 0)
            if member is not None:
                ranked.append(((weight(host, bucket, rkey), host), member.name))
        ranked.sort(reverse=True)
        return [name for _, name in ranked]

    def owner(self, bucket: str, key: str) -> str | None:
        """The member owning the key (None: no member runs the worker it belongs to);
        computed once per key and view."""
        if len(self.members) == 1:
            return next(iter(self.members))
        found = self._owners.get((bucket, key), _UNSET)
        if found is _UNSET:
            found = self._owner(bucket, key)
            if len(self._owners) >= MEMO_KEYS:
                self._owners.clear()
            self._owners[(bucket, key)] = found
        return found  # type: ignore[return-value]

    def _owner(self, bucket: str, key: str) -> str | None:
        rkey = routing_key(key)
        best: tuple[tuple[int, str], str] | None = None
        for host, workers in self._hosts.items():
            count = next(iter(workers.values())).workers
            member = workers.get(worker_index(count, bucket, key) if count > 1 else 0)
            if member is not None:
                score = (weight(host, bucket, rkey), host)
                if best is None or score > best[0]:
                    best = (score, member.name)
        return None if best is None else best[1]

    def owns(self, bucket: str, key: str) -> bool:
        return self.owner(bucket, key) == self.me

    def mirrors(self, bucket: str, key: str, replicas: int) -> list[str]:
        """The members that keep copies of the key's unflushed writes: the next
        ``replicas - 1`` of its preference list after the owner, on other hosts and
        with a live lease. Computed once per key and view."""
        if replicas <= 1:
            return []
        memo = (bucket, key, replicas)
        found = self._mirrors.get(memo)
        if found is None:
            order = self.preference(bucket, key)
            home = self.members[order[0]].host if order else ""
            found = tuple(n for n in order[1:] if self.members[n].host != home
                          and not self.members[n].held)[:replicas - 1]
            if len(self._mirrors) >= MEMO_KEYS:
                self._mirrors.clear()
            self._mirrors[memo] = found
        return list(found)


def _fingerprint(members: Iterable[str]) -> str:
    return hashlib.blake2b("\n".join(sorted(members)).encode(), digest_size=8).hexdigest()


class Membership(Protocol):
    """The cluster's members as this member knows them now (static or coordinated)."""

    @property
    def view(self) -> View:
        """The current view."""

    @property
    def replicas(self) -> int:
        """Members holding each unflushed write (``--dirty-replicas``)."""

    def serving(self) -> bool:
        """Whether this member may acknowledge writes and serve reads of its keys now
        (its lease is certainly valid everywhere)."""

    async def admit(self, bucket: str, key: str) -> None:
        """Wait until this member may serve ``key`` (it owns it and every member that may
        hold a state of it has handed it over); SlowDown if that does not come soon, or
        if this member is fenced."""

    async def catch_up(self, token: str) -> None:
        """Wait (a little) until this member's view is as new as the one ``token`` names
        (a peer's); it may be newer already."""

    async def quiescent(self, revision: int | None = None) -> int:
        """Wait until every hand-off of the current view (at least ``revision``) has
        ended; the revision of that view. Listings are taken at such points."""

    def settled_keys(self) -> Mapping[str, int]:
        """Per member, the newest revision it has finished handing keys over for."""
