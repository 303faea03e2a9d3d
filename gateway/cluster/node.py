"""One cluster member: its ring, peer connections, health checks, storage wrapper and
ASGI layer, built from ClusterSettings by the composition root."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp

from backends.base import Backend
from backends.errors import ServiceUnavailable
from gateway.cache.cluster_view import ClusterView
from gateway.cache.flusher import FlushPacer
from gateway.cache.tier import CacheTier
from gateway.cluster.backend import ClusterBackend
from gateway.cluster.forward import ClusterGateway
from gateway.cluster.health import HealthMonitor
from gateway.cluster.member_file import MemberFile
from gateway.cluster.membership import Membership, load
from gateway.cluster.mirror_store import MirrorStore
from gateway.cluster.peer_api import PeerAPI
from gateway.cluster.peerauth import PeerAuth
from gateway.cluster.placement import Placement
from gateway.cluster.remote import PeerClient
from gateway.cluster.replication import Replication
from gateway.cluster.ring import HASH_NAME, Ring, fingerprint
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.transport import PeerTransport

log = logging.getLogger("squall.cluster")
RING_FORMAT = 1


class ClusterNode:
    """Everything this member runs for the cluster; ``backend`` replaces ``local`` as the
    top of the storage stack. Started and stopped by the application lifespan."""

    def __init__(self, settings: ClusterSettings, local: Backend, cache: CacheTier | None,
                 *, registry: CollectorRegistry | None = None) -> None:
        # The list changes are judged against: --peers, or nothing for a member file
        # (its list is expected to change; a saved list always wins over it).
        base = settings.ring.members if settings.peers_file is None else ()
        saved = load(settings.membership_file, base)
        version, left = 0, False
        if saved is not None:  # a live change committed since the start with --peers
            version, members = saved
            me = settings.ring.self_url
            left = me not in members
            if not left:
                settings = dataclasses.replace(settings,
                                               ring=Ring(members, members.index(me)))
        ring = settings.ring
        self.ring = ring
        self.local = local
        self._cache = ClusterView(cache) if cache is not None else None
        self._registry = registry
        self.auth = PeerAuth(settings.secret, ring_id=ring.id, self_index=ring.self_index,
                             max_skew_s=settings.max_skew_s)
        self.transport = PeerTransport(settings, self.auth)
        # node id -> client; changed in place by apply() (ClusterBackend holds this dict)
        self._peers = peers = {i: PeerClient(self.transport, i)
                               for i in range(len(ring.members)) if i != ring.self_index}
        self.health = HealthMonitor(ring, self.transport, interval_s=settings.health_interval_s,
                                    registry=registry)
        self.placement = Placement(ring, self.health, settings.dirty_replicas)
        self.replication: Replication | None = None
        if settings.dirty_replicas > 1 and self._cache is not None \
                and settings.mirror_dir is not None:
            self.replication = Replication(self.placement, MirrorStore(settings.mirror_dir),
                                           self._cache, local, peers)
        self.backend = ClusterBackend(local, self.placement, peers, cache=self._cache,
                                      replication=self.replication)
        self.peer_api = PeerAPI(local, self._cache, self.placement, self.auth,
                                self.backend.forget_bucket,
                                self.backend.heard_settings_changed,
                                lambda: self.backend.key_operations,
                                replication=self.replication,
                                objects=self.backend if self.replication else None)
        self.membership = Membership(self, version=version, path=settings.membership_file,
                                     joining=settings.join and saved is None, base=base)
        if left:
            self.membership.left = True
            self.membership.gate.clear()
            self.depart(members)
        self.peer_api.add_route("POST", "membership", self.membership.handle)
        self.health.heard = self.membership.heard
        self.member_file = MemberFile(self, settings.peers_file,
                                      interval_s=settings.health_interval_s) \
            if settings.peers_file is not None and not left else None
        self._fresh = saved is None
        self._started = asyncio.Event()  # start() has ended (gate_flushes)
        self._dropped_stale = False  # ... and found this member removed while away
        self.ready: Callable[[], bool] = lambda: True

    @property
    def cache(self) -> ClusterView | None:
        return self._cache

    @property
    def replicated(self) -> bool:
        """Whether mirrored write-back runs here."""
        return self.replication is not None

    def owns(self, bucket: str, key: str) -> bool:
        """Whether this member owns the key under the current member list."""
        return self.ring.owns(bucket, key)

    def apply(self, members: tuple[str, ...], self_index: int) -> None:
        """Switch to a new member list (a committed live membership change): ring, peer
        ids, authentication, health. Callers have stopped key traffic (membership.py)."""
        ring = Ring(members, self_index)
        self.ring = ring
        self.auth.rebind(ring.id, self_index)
        self.transport.set_members(members, self_index)
        self._peers.clear()
        self._peers.update({i: PeerClient(self.transport, i) for i in range(len(members))
                            if i != self_index})
        self.placement.rebind(ring)
        self.health.rebind(ring)

    def depart(self, members: tuple[str, ...]) -> None:
        """This member was removed by a live change to ``members``: from now on it
        forwards every client request to them (ClusterGateway), signed for their list as
        a former member (node id ``len(members)``, which no member has). It serves no
        key and makes no peer call of its own any more."""
        self.membership.successors = members
        self.auth.rebind(fingerprint(members), len(members))
        self.transport.set_members(members, -1)
        self._peers.clear()

    def gate_flushes(self, pace: FlushPacer) -> FlushPacer:
        """The cache flusher's pacer behind this member's start: a flush waits until
        the member knows it is still one (a member removed while it was down drops its
        unflushed records instead: the flushes of those that waited fail, and the
        records are gone). Then ``pace`` alone."""
        async def paced(bucket: str, nbytes: int) -> None:
            if not self._started.is_set():
                await self._started.wait()
                if self._dropped_stale:
                    raise ServiceUnavailable("this member was removed from the cluster "
                                             "while it was down: its unflushed records "
                                             "are dropped, not flushed")
            await pace(bucket, nbytes)
        return paced

    async def start(self) -> None:
        try:
            await self._start()
        finally:
            self._started.set()

    async def _start(self) -> None:
        departed = self.membership.left
        if self.member_file is not None and self._fresh and not self.membership.joining:
            await self.member_file.find_cluster()
        # (members running --workers N are never removed live: nothing to ask)
        if not departed and not self.membership.joining and len(self.ring.members) > 1 \
                and self.ring.workers == 1:
            departed = self._dropped_stale = await self.membership.removed_while_away()
        if self._cache is not None:
            # A joining member owns nothing yet: what it holds from an earlier life may be
            # stale once it owns keys again. A former member owns nothing for good.
            await hand_off(self._cache, self.ring,
                           keep=not (self.membership.joining or departed))
        if departed:
            return  # it forwards client requests, nothing more
        if self.replication is not None:
            await self.replication.start()
        self.health.start()
        if self.member_file is not None:
            self.member_file.start()

    async def stop(self) -> None:
        if self.member_file is not None:
            await self.member_file.stop()
        if self.replication is not None:
            await self.replication.stop()
        await self.health.stop()
        await self.transport.aclose()

    def asgi(self, inner: ASGIApp, *, domain: str | None) -> ClusterGateway:
        return ClusterGateway(inner, ring=self.placement, auth=self.auth, transport=self.transport,
                              membership=self.membership,
                              peer_api=self.peer_api, describe=self.describe, domain=domain,
                              registry=self._registry)

    def describe(self) -> dict[str, Any]:
        """``GET /_squall/cluster``: the ring, enough to compute owners, and health (a
        removed member: the members it forwards to, health unknown)."""
        successors = self.membership.successors
        if successors:
            return {"format": RING_FORMAT, "hash": HASH_NAME,
                    "ring_id": fingerprint(successors), "node_id": None,
                    "members": [{"node_id": i, "url": url, "self": False,
                                 "health": "unknown"} for i, url in enumerate(successors)],
                    "membership_version": self.membership.version,
                    "membership_base": self.membership.base_id, "membership": "left"}
        members = []
        for index, url in enumerate(self.ring.members):
            member: dict[str, Any] = {"node_id": index, "url": url,
                                      "self": index == self.ring.self_index}
            if index == self.ring.self_index:
                member.update(health="up" if self.ready() else "starting", since=None,
                              last_ok=time.time(), error=None, latency_ms=0.0)
            else:
                member.update(self.health.describe(index))
            members.append(member)
        return {"format": RING_FORMAT, "hash": HASH_NAME, "ring_id": self.ring.id,
                "node_id": self.ring.self_index, "members": members,
                "membership_version": self.membership.version,
                "membership_base": self.membership.base_id,
                "membership": "left" if self.membership.left else
                "joining" if self.membership.joining else
                "changing" if self.membership.pending else "stable"}

    def describe_hosts(self) -> dict[str, Any]:
        """``GET /_squall/cluster`` on the port of a member running ``--workers N``: the
        hosts, enough for a client to compute a key's host (ring.py), which passes the
        request to the key's worker; a host is as healthy as its least healthy worker."""
        ring = self.ring
        mine = ring.self_index // ring.workers
        members = []
        for host, url in enumerate(ring.hosts):
            workers = range(host * ring.workers, (host + 1) * ring.workers)
            health = [("up" if self.ready() else "starting") if i == ring.self_index
                      else self.health.describe(i)["health"] for i in workers]
            worst = next((h for h in ("down", "ring-mismatch", "starting", "unknown")
                          if h in health), "up")
            members.append({"node_id": host, "url": url, "self": host == mine,
                            "health": worst, "workers": health})
        return {"format": RING_FORMAT, "hash": HASH_NAME, "ring_id": fingerprint(ring.hosts),
                "node_id": mine, "members": members, "workers": ring.workers,
                "membership_version": self.membership.version, "membership": "stable"}


def describe_single() -> dict[str, Any]:
    """``GET /_squall/cluster`` of a gateway started without peers: no ring."""
    return {"format": RING_FORMAT, "hash": HASH_NAME, "ring_id": None, "node_id": None,
            "members": []}


async def hand_off(cache: ClusterView, ring: Ring, *, keep: bool = True) -> None:
    """Before serving: records of keys this node no longer owns (the member list
    changed) are dropped when clean (the owner may change the key) and flushed at once
    when dirty. See docs/cluster.md, "The static way"."""
    dropped, urgent = await cache.hand_off(ring.owns if keep else lambda b, k: False)
    if dropped or urgent:
        log.warning("cluster: %d cached records of keys other members own were dropped, "
                    "%d unflushed ones are being flushed now", dropped, urgent)
