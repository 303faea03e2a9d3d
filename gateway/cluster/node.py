"""One cluster member: its ring, peer connections, health checks, storage wrapper and
ASGI layer, built from ClusterSettings by the composition root."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp

from backends.base import Backend
from gateway.cache.cluster_view import ClusterView
from gateway.cache.tier import CacheTier
from gateway.cluster.backend import ClusterBackend
from gateway.cluster.forward import ClusterGateway
from gateway.cluster.health import HealthMonitor
from gateway.cluster.mirror_store import MirrorStore
from gateway.cluster.peer_api import PeerAPI
from gateway.cluster.peerauth import PeerAuth
from gateway.cluster.placement import Placement
from gateway.cluster.remote import PeerClient
from gateway.cluster.replication import Replication
from gateway.cluster.ring import HASH_NAME, Ring
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.transport import PeerTransport

log = logging.getLogger("squall.cluster")
RING_FORMAT = 1


class ClusterNode:
    """Everything this member runs for the cluster; ``backend`` replaces ``local`` as the
    top of the storage stack. Started and stopped by the application lifespan."""

    def __init__(self, settings: ClusterSettings, local: Backend, cache: CacheTier | None,
                 *, registry: CollectorRegistry | None = None) -> None:
        ring = settings.ring
        self.ring = ring
        self._cache = ClusterView(cache) if cache is not None else None
        self._registry = registry
        self.auth = PeerAuth(settings.secret, ring_id=ring.id, self_index=ring.self_index,
                             max_skew_s=settings.max_skew_s)
        self.transport = PeerTransport(settings, self.auth)
        peers = {i: PeerClient(self.transport, i) for i in range(len(ring.members))
                 if i != ring.self_index}
        self.health = HealthMonitor(ring, self.transport, interval_s=settings.health_interval_s,
                                    registry=registry)
        self.placement = Placement(ring, self.health, settings.dirty_replicas)
        self.replication: Replication | None = None
        if self.placement.mirrored and self._cache is not None \
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
        self.ready: Callable[[], bool] = lambda: True

    async def start(self) -> None:
        if self._cache is not None:
            await hand_off(self._cache, self.ring)
        if self.replication is not None:
            await self.replication.start()
        self.health.start()

    async def stop(self) -> None:
        if self.replication is not None:
            await self.replication.stop()
        await self.health.stop()
        await self.transport.aclose()

    def asgi(self, inner: ASGIApp, *, domain: str | None) -> ClusterGateway:
        return ClusterGateway(inner, ring=self.placement, auth=self.auth, transport=self.transport,
                              peer_api=self.peer_api, describe=self.describe, domain=domain,
                              registry=self._registry)

    def describe(self) -> dict[str, Any]:
        """``GET /_squall/cluster``: the ring, enough to compute owners, and health."""
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
                "node_id": self.ring.self_index, "members": members}


def describe_single() -> dict[str, Any]:
    """``GET /_squall/cluster`` of a gateway started without peers: no ring."""
    return {"format": RING_FORMAT, "hash": HASH_NAME, "ring_id": None, "node_id": None,
            "members": []}


async def hand_off(cache: ClusterView, ring: Ring) -> None:
    """Before serving: records of keys this node no longer owns (the member list
    changed) are dropped when clean (the owner may change the key) and flushed at once
    when dirty. See docs/cluster.md, "Changing the member list"."""
    dropped, urgent = await cache.hand_off(ring.owns)
    if dropped or urgent:
        log.warning("cluster: %d cached records of keys other members own were dropped, "
                    "%d unflushed ones are being flushed now", dropped, urgent)
