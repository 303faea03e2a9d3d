"""This member's lease in etcd, and the fence that follows from it.

The member's registration lives under a lease of ``ttl`` seconds, kept alive every
``ttl / 6`` seconds. etcd deletes the registration (and the ring changes, moving the
member's keys) only once the lease has expired on etcd's leader, at least ``ttl``
seconds after the leader processed the last keep-alive, which is after the member sent
it. The member therefore stops serving (:meth:`Session.serving` turns false) once
``FENCE_FRACTION * ttl`` seconds have passed on its own monotonic clock since it *sent*
the last keep-alive that succeeded: before its lease can have expired anywhere, as long
as its clock does not run slower than etcd's by more than a third (any working clock
drifts by parts per million). A new etcd leader renews every lease in full, which only
moves expiry later. See docs/cluster.md, "Fencing".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from gateway.background import PeriodicTask
from gateway.cluster.coordinator.client import CoordinatorUnavailable, EtcdClient

log = logging.getLogger("squall.cluster")
FENCE_FRACTION = 2 / 3
KEEPALIVES_PER_TTL = 6


class LeaseLost(CoordinatorUnavailable):
    """etcd no longer knows this member's lease (it expired, or was revoked)."""


class Session:
    """A lease, kept alive, and whether this member may serve under it."""

    def __init__(self, client: EtcdClient, ttl_s: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self.ttl_s = ttl_s
        self._clock = clock
        self.lease: int | None = None
        self._valid_until = 0.0
        self._fenced = False  # told the log that it stopped serving for want of etcd

    @property
    def interval_s(self) -> float:
        return self.ttl_s / KEEPALIVES_PER_TTL

    def serving(self) -> bool:
        """Whether the lease is certainly alive on etcd now (see the module docstring)."""
        return self.lease is not None and self._clock() < self._valid_until

    def remaining_s(self) -> float:
        """Seconds left before this member stops serving unless a keep-alive succeeds."""
        return max(0.0, self._valid_until - self._clock()) if self.lease else 0.0

    def _renewed(self, sent: float, ttl: float) -> None:
        self._valid_until = max(self._valid_until, sent + FENCE_FRACTION * ttl)

    async def grant(self) -> int:
        """A new lease; the member serves under it from now on."""
        sent = self._clock()
        reply = await self._client.call(lambda c: c.lease(self.ttl_s))
        self.lease = int(reply.id)
        self._valid_until = 0.0
        self._renewed(sent, float(reply.ttl))
        return self.lease

    async def resume(self, lease: int) -> bool:
        """Keep ``lease`` (this member's from an earlier run) if etcd still has it."""
        sent = self._clock()
        try:
            ttl = await self._keepalive(lease)
        except LeaseLost:
            return False
        self.lease = lease
        self._valid_until = 0.0
        self._renewed(sent, ttl)
        return True

    async def _keepalive(self, lease: int) -> float:
        reply = await self._client.call(lambda c: c.refresh_lease(lease))
        ttl = float(reply.TTL) if reply is not None else 0.0
        if ttl <= 0:
            raise LeaseLost(f"etcd lease {lease:x} of this member has expired")
        return ttl

    def keep_alive(self, on_lost: Callable[[], Awaitable[None]]) -> PeriodicTask:
        """A task renewing the lease every :attr:`interval_s` from its start to its stop;
        ``on_lost()`` once etcd says the lease is gone (and again for each lease that
        follows, if it is lost in turn)."""
        return PeriodicTask(lambda: self._renew(on_lost), every=lambda: self.interval_s,
                            wait_first=True, name="cluster-etcd-lease", log=log,
                            failed="renewing this member's etcd lease")

    async def _renew(self, on_lost: Callable[[], Awaitable[None]]) -> None:
        lease = self.lease
        if lease is None:
            return
        sent = self._clock()
        try:
            ttl = await self._keepalive(lease)
        except LeaseLost:
            if self.lease == lease:
                log.error("this member's etcd lease has expired: it stops serving and "
                          "joins again")
                self.lease = None
                await on_lost()
            return
        except CoordinatorUnavailable as exc:
            if not self.serving() and not self._fenced:
                self._fenced = True
                log.error("this member cannot renew its etcd lease (%s): it stops "
                          "serving until it can", exc)
            return
        if self.lease == lease:
            self._renewed(sent, ttl)
            if self._fenced:
                self._fenced = False
                log.warning("this member renewed its etcd lease again")

    async def revoke(self) -> None:
        """End the lease now (leaving the cluster): etcd deletes what is attached to it."""
        lease, self.lease = self.lease, None
        if lease is not None:
            await self._client.call(lambda c: c.revoke_lease(lease))
