"""One cluster member: its membership (etcd, or a fixed list), peer connections, storage
wrapper, hand-overs and ASGI layer, built from ClusterSettings by the composition root."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from starlette.types import ASGIApp

from backends.core.base import Backend
from backends.core.errors import StorageError
from gateway.cache.cluster_view import ClusterView
from gateway.cache.flusher import FlushPacer
from gateway.cache.keyguard import WriteGuard
from gateway.cache.tier import CacheTier
from gateway.cluster.backend import ClusterBackend
from gateway.cluster.coordinator.keys import Registration
from gateway.cluster.coordinator.membership import EtcdMembership
from gateway.cluster.forward import ClusterGateway
from gateway.cluster.mirror_store import MirrorStore
from gateway.cluster.peer_api import PeerAPI
from gateway.cluster.peerauth import PeerAuth
from gateway.cluster.rebalance import Rebalancer
from gateway.cluster.relay import ClusterRelay
from gateway.cluster.remote import Peers
from gateway.cluster.replication import Replication
from gateway.cluster.ring import HASH_NAME
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.static import StaticMembership
from gateway.cluster.transport import PeerTransport
from gateway.cluster.view import Membership, View, member_id

log = logging.getLogger("squall.cluster")
RING_FORMAT = 2
#: how long a leaving member tries to hand its unflushed writes over
LEAVE_TIMEOUT_S = 60.0


class ClusterNode:
    """Everything this member runs for the cluster; ``backend`` replaces ``local`` as the
    top of the storage stack. Started and stopped by the application lifespan."""

    def __init__(self, settings: ClusterSettings, local: Backend, cache: CacheTier | None,
                 *, registry: CollectorRegistry | None = None) -> None:
        self.settings = settings
        self._relay: ClusterRelay | None = None
        self.name = settings.name
        self.local = local
        self._cache = ClusterView(cache) if cache is not None else None
        self.etcd: EtcdMembership | None = None
        self.membership: Membership
        if settings.coordinator is not None:
            assert settings.state_file is not None
            self.etcd = EtcdMembership(
                settings.coordinator,
                Registration(settings.advertise_url, settings.worker, settings.workers,
                             time.time()),
                settings.dirty_replicas, state_file=settings.state_file)
            self.membership = self.etcd
        else:
            assert settings.ring is not None
            self.membership = StaticMembership(settings.ring)
        self.auth = PeerAuth(settings.secret, member=member_id(self.name),
                             max_skew_s=settings.max_skew_s)
        self.transport = PeerTransport(settings, self.auth)
        self.peers = Peers(self.transport, self.membership)
        self.guard = WriteGuard()
        self.replication: Replication | None = None
        self.rebalancer: Rebalancer | None = None
        if self.etcd is not None:
            if self._cache is not None:
                assert settings.mirror_dir is not None
                self.replication = Replication(self.etcd, MirrorStore(settings.mirror_dir),
                                               self._cache, local, self.peers)
            self.rebalancer = Rebalancer(self.etcd, self._cache, self.replication, self.guard)
        self.backend = ClusterBackend(local, self.membership, self.peers, cache=self._cache,
                                      replication=self.replication, guard=self.guard)
        self.peer_api = PeerAPI(local, self._cache, self.membership, self.auth,
                                self.backend.forget_bucket,
                                self.backend.heard_settings_changed,
                                lambda: self.backend.key_operations,
                                replication=self.replication, objects=self.backend)
        if registry is not None:
            registry.register(_Collector(self))
        self._forwarded = Counter("squall_cluster_forwarded_requests",
                                  "S3 requests passed on to the key's owner", ["member"],
                                  registry=registry) if registry is not None else None

    @property
    def cache(self) -> ClusterView | None:
        return self._cache

    @property
    def view(self) -> View:
        return self.membership.view

    def owns(self, bucket: str, key: str) -> bool:
        """Whether this member owns the key in its current view."""
        return self.membership.view.owns(bucket, key)

    def gate_flushes(self, pace: FlushPacer) -> FlushPacer:
        """The cache flusher's pacer behind this member's lease: a member that may not
        serve (not registered yet, or fenced) flushes nothing, since another member may
        own its keys by now. Then ``pace`` alone."""
        etcd = self.etcd
        if etcd is None:
            return pace

        async def paced(bucket: str, nbytes: int) -> None:
            await etcd.wait_serving()
            await pace(bucket, nbytes)
        return paced

    async def start(self) -> None:
        if self.etcd is None:
            return
        if self.replication is not None:
            await self.replication.load()
        self.etcd.on_fresh = self._start_anew
        await self.etcd.start()
        if self.replication is not None:
            self.replication.start()
            await self.replication.reconcile()
        assert self.rebalancer is not None
        self.rebalancer.start()

    async def _start_anew(self) -> None:
        if self.replication is not None:
            await self.replication.start_anew()
        elif self._cache is not None:
            await self._cache.discard_all()

    async def leave(self) -> None:
        """Leave the cluster (a stop, or a Kubernetes pod's preStop): serve nothing more,
        hand this member's unflushed writes to the members that own their keys without
        its host, flush what could not be handed over if this member holds the only copy,
        then end the lease. (The workers of a host leave together: none hands its writes
        to a sibling that is leaving too.)"""
        etcd = self.etcd
        if etcd is None or etcd.left:
            return
        etcd.left = True
        view = etcd.view
        me = view.members.get(self.name)
        after = View(view.revision, {
            n: m for n, m in view.members.items()
            if n != self.name and (me is None or m.host != me.host)}, self.name)
        handed = failed = 0
        if self._cache is not None and self.replication is not None and after.members:
            deadline = time.monotonic() + LEAVE_TIMEOUT_S
            for bucket, key in self._cache.dirty_keys():
                owner = after.owner(bucket, key)
                if owner is None or time.monotonic() > deadline:
                    failed += 1
                    continue
                try:
                    # bounded: a hand-over waits for the key's flush in flight to stop and
                    # for the new owner's answer, and the leave must end all the same
                    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                        await self.replication.hand_over(bucket, key, owner)
                    handed += 1
                except TimeoutError:
                    failed += 1
                    log.warning("handing %s/%r over to %s before leaving took more than "
                                "%.0f s in all; the rest is flushed instead", bucket, key,
                                owner, LEAVE_TIMEOUT_S)
                except StorageError as exc:
                    failed += 1
                    log.warning("handing %s/%r over before leaving failed: %s", bucket, key,
                                exc)
        if self._cache is not None and (failed or not after.members or etcd.holding):
            log.warning("flushing what this member holds before it leaves the cluster")
            try:
                async with asyncio.timeout(LEAVE_TIMEOUT_S):
                    for bucket in {b for b, _ in self._cache.dirty_keys()}:
                        await self._cache.wait_flushed(bucket)
            except TimeoutError:
                log.error("this member leaves with unflushed writes it could neither hand "
                          "over nor flush in %.0f s; they stay in its cache", LEAVE_TIMEOUT_S)
        await etcd.leave()
        log.info("left the cluster: %d unflushed keys handed over", handed)

    async def stop(self) -> None:
        """Stop (not leave: a member restarted within its lease's TTL takes its lease
        over, and nothing moves; one that stays away longer is replaced from the copies
        of its writes)."""
        if self.rebalancer is not None:
            await self.rebalancer.stop()
        if self.etcd is not None:
            await self.etcd.stop()
        if self.replication is not None:
            await self.replication.stop()
        await self.transport.aclose()
        if self._relay is not None:
            self._relay.close()

    def asgi(self, inner: ASGIApp, *, domain: str | None) -> ClusterGateway:
        return ClusterGateway(inner, membership=self.membership, auth=self.auth,
                              transport=self.transport, peer_api=self.peer_api,
                              describe=self.describe, domain=domain,
                              on_forward=self._count_forward)

    def _count_forward(self, member: str) -> None:
        if self._forwarded is not None:
            self._forwarded.labels(member).inc()

    def relay(self, *, domain: str | None) -> ClusterRelay:
        """The byte relay of requests for keys other members own (the HTTP protocol's
        router; stopped with the member)."""
        if self._relay is None:
            self._relay = ClusterRelay(membership=self.membership, auth=self.auth,
                                       settings=self.settings, domain=domain,
                                       on_forward=self._count_forward)
        return self._relay

    def describe(self) -> dict[str, Any]:
        """``GET /_squall/cluster``: the members, enough to compute owners (every member
        with its host and worker; see gateway/cluster/client.py), and this member's part."""
        view = self.membership.view
        members = [{"name": m.name, "url": m.host, "worker": m.worker, "workers": m.workers,
                    "self": m.name == self.name, "state": "held" if m.held else "up"}
                   for m in sorted(view.members.values(), key=lambda m: m.name)]
        described: dict[str, Any] = {
            "format": RING_FORMAT, "hash": HASH_NAME, "revision": view.revision,
            "coordinator": None, "self": self.name, "serving": self.membership.serving(),
            "members": members}
        etcd = self.etcd
        if etcd is not None:
            described.update(
                coordinator=etcd.settings.url, lease=f"{etcd.session.lease:x}"
                if etcd.session.lease else None,
                lease_remaining_s=round(etcd.session.remaining_s(), 3),
                held=etcd.holding, synced=dict(self.membership.settled_keys()),
                handed_over=self.rebalancer.done if self.rebalancer else None,
                left=etcd.left, mirror_copies=len(self.replication.store.records)
                if self.replication is not None else 0)
        return described


def describe_single() -> dict[str, Any]:
    """``GET /_squall/cluster`` of a gateway that is no cluster member: no ring."""
    return {"format": RING_FORMAT, "hash": HASH_NAME, "revision": None, "coordinator": None,
            "self": None, "serving": True, "members": []}


class _Collector:
    """The member's cluster figures, read when metrics are collected."""

    def __init__(self, node: ClusterNode) -> None:
        self._node = node

    def collect(self) -> list[Metric]:
        node = self._node
        view = node.membership.view
        members = GaugeMetricFamily("squall_cluster_members",
                                    "members in this member's view of the ring", labels=["state"])
        members.add_metric(["up"], sum(not m.held for m in view.members.values()))
        members.add_metric(["held"], sum(m.held for m in view.members.values()))
        serving = GaugeMetricFamily("squall_cluster_serving",
                                    "1 while this member may serve its keys (its lease is "
                                    "valid)")
        serving.add_metric([], 1.0 if node.membership.serving() else 0.0)
        revision = GaugeMetricFamily("squall_cluster_revision",
                                     "the etcd revision of this member's view of the ring")
        revision.add_metric([], float(view.revision))
        copies = GaugeMetricFamily("squall_cluster_mirror_copies",
                                   "copies of other members' unflushed writes (and states "
                                   "handed over, not adopted yet) this member holds")
        replication = node.replication
        copies.add_metric([], float(len(replication.store.records) if replication else 0))
        return [members, serving, revision, copies]
