"""This host's workers among the cluster ring's members (docs/workers.md).

Without ``--peers`` the ring's members are this host's workers, 0 to N-1. With
``--peers`` (every host running N workers) they are the hosts' workers, host after host:
this host's are members ``first`` to ``first + N - 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.cluster.peerauth import marker_target


@dataclass(frozen=True, slots=True)
class HostWorkers:
    first: int
    count: int

    def worker(self, member: int) -> int | None:
        """The worker of this host that is ring member ``member`` (None: another host's)."""
        worker = member - self.first
        return worker if 0 <= worker < self.count else None

    def addressed(self, marker: bytes) -> int | None:
        """The worker of this host a peer marker is signed for (not verified; None: it is
        malformed or names another host's member)."""
        member = marker_target(marker.decode("latin-1"))
        return None if member is None else self.worker(member)
