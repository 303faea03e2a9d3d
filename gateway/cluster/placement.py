"""Who serves a key now: its owner, or, with mirrored write-back while the owner is
down, the next member on the key's ring that is up (its *acting owner*).

A key's *preference list* is every member ordered by its rendezvous weight for the key
(highest first): the first is the owner (:mod:`gateway.cluster.ring`), the next
``replicas - 1`` members that are up keep mirror copies of its unflushed writes. With
``replicas == 1`` nothing here consults health: ownership is the ring's, as before.
When the members are the workers of several hosts (``Ring.workers`` > 1), the list holds
one member per host, the key's worker there, hosts in the order of their weights: the
copies of a write are on other hosts than its owner's, never beside it.
"""

from __future__ import annotations

import time

from gateway.cluster.health import Health, HealthMonitor
from gateway.cluster.ring import Ring, routing_key, weight, worker_index

#: how long a member that claimed its keys back counts as up before it answers checks
CLAIM_GRACE_S = 30.0
#: how long a member never seen up must stay down before its keys move
STARTUP_GRACE_S = 10.0


class Placement:
    """The ring plus health: owner, acting owner and mirrors of a key."""

    def __init__(self, ring: Ring, health: HealthMonitor, replicas: int) -> None:
        self.ring = ring
        self.members = ring.members
        self.self_index = ring.self_index
        self.id = ring.id
        self._wanted = max(1, replicas)  # --dirty-replicas, bounded by the member count
        self.replicas = min(self._wanted, len(ring.hosts))
        self._health = health
        # node -> when it claimed its keys back (it serves them even if the last health
        # check, older than that, found it down)
        self._returned: dict[int, float] = {}
        #: members being removed while down (a live removal confirmed them dead): down
        #: whatever the last health check found
        self.lost: set[int] = set()

    def rebind(self, ring: Ring) -> None:
        """The member list changed (a committed live membership change: nothing was
        unflushed and no mirror copy was held anywhere at that moment)."""
        self.ring, self.members = ring, ring.members
        self.self_index, self.id = ring.self_index, ring.id
        self.replicas = min(self._wanted, len(ring.hosts))
        self._returned.clear()
        self.lost.clear()

    @property
    def mirrored(self) -> bool:
        return self.replicas > 1

    def preference(self, bucket: str, key: str) -> list[int]:
        rkey = routing_key(key)
        workers = self.ring.workers
        if workers == 1:
            return sorted(range(len(self.members)), reverse=True,
                          key=lambda i: (weight(self.members[i], bucket, rkey),
                                         self.members[i]))
        hosts = self.ring.hosts
        order = sorted(range(len(hosts)), reverse=True,
                       key=lambda h: (weight(hosts[h], bucket, rkey), hosts[h]))
        worker = worker_index(workers, bucket, key)
        return [h * workers + worker for h in order]

    def down(self, node: int) -> bool:
        """Whether ``node`` is down now: as the last health check found it, except just
        after it claimed its keys back (it listens only once it has started: until a
        check finds it answering, or for ``CLAIM_GRACE_S``, it counts as up), and while
        members start (one never seen up counts as down after ``STARTUP_GRACE_S``)."""
        if node == self.self_index:
            return False
        if node in self.lost:
            return True
        state = self._health.states[node]
        claimed = self._returned.get(node)
        if claimed is not None:
            if state.last_ok is not None and state.last_ok > claimed:
                del self._returned[node]  # it was up since: health decides again
            elif time.time() < claimed + CLAIM_GRACE_S or state.checked <= claimed:
                return False
        if state.health is not Health.DOWN:
            return False
        # Not yet seen up by this member (both may be starting): down only after a while.
        return state.last_ok is not None or time.time() > state.since + STARTUP_GRACE_S

    def returned(self, node: int) -> None:
        """Member ``node`` claimed its keys back: it serves them from now on."""
        self._returned[node] = time.time()

    def owner(self, bucket: str, key: str) -> int:
        """The member serving ``key`` now (the ring's owner unless mirrored and down)."""
        if not self.mirrored:
            return self.ring.owner(bucket, key)
        order = self.preference(bucket, key)
        return next((n for n in order if not self.down(n)), order[0])

    def stand_in(self, bucket: str, key: str, lost: int) -> int | None:
        """The member that serves ``key`` once member ``lost`` is gone: the first of the
        key's preference list, ``lost`` left out, that is up (None: nobody is)."""
        return next((n for n in self.preference(bucket, key)
                     if n != lost and not self.down(n)), None)

    def owns(self, bucket: str, key: str) -> bool:
        return len(self.members) == 1 or self.owner(bucket, key) == self.self_index

    def mirrors(self, bucket: str, key: str) -> list[int]:
        """The members that keep mirror copies of the key's writes made here: the next
        ``replicas - 1`` members after the serving one that are up."""
        if not self.mirrored:
            return []
        order = [n for n in self.preference(bucket, key) if not self.down(n)]
        server = self.owner(bucket, key)
        if server in order:
            order = order[order.index(server) + 1:]
        return order[:self.replicas - 1]
