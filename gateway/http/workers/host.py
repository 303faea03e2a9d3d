"""This host's workers among the cluster ring's members (docs/workers.md).

Without a cluster the ring's members are this host's workers, ``http://worker-<k>``.
In a cluster of hosts that each run N workers (``--peers`` or ``--coordinator``) they are
``<host URL>/worker-<k>``. Either way a worker knows the names of its host's workers and
which one a peer marker is signed for.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.cluster.peerauth import marker_target
from gateway.cluster.view import member_id


def single_host(worker: int) -> str:
    """The ring name of worker ``worker`` of a gateway that is no cluster member."""
    return f"http://worker-{worker}"


class HostWorkers:
    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self._index = {name: k for k, name in enumerate(self.names)}
        self._ids = {member_id(name): k for k, name in enumerate(self.names)}

    @classmethod
    def of(cls, name: str, index: int, count: int) -> HostWorkers:
        """The workers of the host whose worker ``index`` is the ring member ``name``."""
        if name == single_host(index):
            return cls([single_host(k) for k in range(count)])
        host = name.removesuffix(f"/worker-{index}")  # a host of a cluster of hosts
        return cls([f"{host}/worker-{k}" for k in range(count)])

    @property
    def in_cluster(self) -> bool:
        """Whether these are the workers of one host of a cluster of hosts."""
        return self.names[0] != single_host(0)

    @property
    def count(self) -> int:
        return len(self.names)

    def worker(self, member: str | None) -> int | None:
        """The worker of this host that is ring member ``member`` (None: another host's)."""
        return None if member is None else self._index.get(member)

    def addressed(self, marker: bytes) -> int | None:
        """The worker of this host a peer marker is signed for (not verified; None: it is
        malformed or names another host's member)."""
        target = marker_target(marker.decode("latin-1"))
        return None if target is None else self._ids.get(target)
