"""A member list fixed at start (``--peers``, or the workers of one host).

Ownership never moves: every key has one owner for the life of the list, so there is
nothing to hand over and nobody to fence. A member that is down or cut off makes its
keys unavailable (503; the log names it) until it returns; no other member serves them, so a
partition cannot make two members serve one key. Mirrored write-back, failover and
live changes need a coordinator (docs/cluster.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from backends.core.errors import ServiceUnavailable
from gateway.cluster.errors import RingMismatch
from gateway.cluster.ring import Ring
from gateway.cluster.view import View


class StaticMembership:
    """:class:`~gateway.cluster.view.Membership` of a fixed member list."""

    def __init__(self, ring: Ring) -> None:
        self.ring = ring
        self._view = View.static(ring)

    @property
    def view(self) -> View:
        return self._view

    @property
    def replicas(self) -> int:
        return 1

    def serving(self) -> bool:
        return True

    async def admit(self, bucket: str, key: str) -> None:
        if not self._view.owns(bucket, key):
            raise ServiceUnavailable(f"{bucket}/{key} is owned by another cluster member")

    async def catch_up(self, token: str) -> None:
        if token != self._view.token:
            raise RingMismatch("cluster members disagree on the member list; give every "
                               "member the same --peers (and --workers N)")

    async def quiescent(self, revision: int | None = None) -> int:
        return 0

    def settled_keys(self) -> Mapping[str, int]:
        return {}
