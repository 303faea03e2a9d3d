"""Connection slots of one HTTP server: how many connections each client address holds,
whether slots are running short, and the few kept for probes.

A connection is admitted to a *regular* slot while the server holds fewer than
``max_connections`` and its client address fewer than ``per_client``; beyond its
address's share it is refused (the connection is aborted at once). When every regular
slot is taken, a connection from an address that holds none may take a *probe* slot
(``probe_reserve`` of them beyond ``max_connections``, at most a quarter per address):
it may only ask for ``/_squall/health`` or ``/_squall/metrics`` (anything else is
answered ``503 SlowDown`` and closed), so that liveness probes and scrapes, which come
from addresses of their own (the kubelet's, Prometheus'), still get in while S3 clients
or hostile ones hold every regular slot; the addresses that hold them cannot take the
probe slots too.

Slots are *busy* once ``busy_share`` of ``max_connections`` are taken: connections still
waiting for a request's headers then get ``busy_header_timeout_s`` instead of the usual
header timeout (:mod:`gateway.http.limits` applies it, and shortens the connections
already waiting once, when slots become busy).

Client addresses are IPv4 addresses, and IPv6 ``/64`` prefixes (one host usually holds a
whole ``/64``); IPv4-mapped IPv6 addresses count as their IPv4 address. Connections with
no address (the Unix sockets between the workers of one gateway) have no per-client
limit. Each process (each worker of ``--workers N``) counts its own connections.
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass

#: the share of a server's slots that makes them busy
BUSY_SHARE = 0.75
#: probe slots beyond ``max_connections``
PROBE_RESERVE = 16


class Slot(enum.Enum):
    """What a new connection was given."""

    REGULAR = 1
    PROBE = 2  # health or metrics only, then closed
    REFUSED = 3


@dataclass(frozen=True, slots=True)
class SlotLimits:
    """``None`` turns a limit off."""

    max_connections: int | None
    per_client: int | None
    probe_reserve: int = PROBE_RESERVE
    busy_share: float = BUSY_SHARE

    @property
    def probe_per_client(self) -> int:
        return max(1, self.probe_reserve // 4)

    @property
    def busy_at(self) -> int | None:
        """Open regular connections from which slots are busy."""
        if self.max_connections is None:
            return None
        return max(1, int(self.max_connections * self.busy_share))


def per_client_default(max_connections: int) -> int:
    """The per-address limit when none is set: a quarter of the slots."""
    return max(1, max_connections // 4)


def client_key(client: tuple[str, int] | None) -> str | None:
    """The address a connection from ``client`` (uvicorn's ``(host, port)``) counts
    against: the IPv4 address, or the IPv6 ``/64``; None for a Unix socket."""
    if not client:
        return None
    host = client[0]
    if ":" not in host:
        return host
    try:
        address = ipaddress.IPv6Address(host.split("%", 1)[0])
    except ValueError:
        return host
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, 64), strict=False))


class ClientSlots:
    """The slot table of one server (all its connections share it; the event loop's
    thread only, so no lock)."""

    def __init__(self, limits: SlotLimits) -> None:
        self.limits = limits
        self.regular = 0
        self.probe = 0
        #: per client address: [regular, probe] connections open
        self._held: dict[str, list[int]] = {}
        self._busy_noticed = False

    def admit(self, key: str | None, *, adopted: bool = False) -> Slot:
        """A slot for a new connection from ``key`` (:func:`client_key`); ``adopted``
        connections (handed over by another worker, admitted there) always get one."""
        limits = self.limits
        held = self._held.get(key) if key is not None else None
        slot = Slot.REGULAR
        if not adopted:
            if held is not None and limits.per_client is not None \
                    and held[0] >= limits.per_client:
                return Slot.REFUSED
            if limits.max_connections is not None and self.regular >= limits.max_connections:
                if self.probe >= limits.probe_reserve or (
                        held is not None and (held[0] or held[1] >= limits.probe_per_client)):
                    return Slot.REFUSED
                slot = Slot.PROBE
        if slot is Slot.REGULAR:
            self.regular += 1
        else:
            self.probe += 1
        if key is not None:
            if held is None:
                held = self._held[key] = [0, 0]
            held[slot is Slot.PROBE] += 1
        return slot

    def release(self, key: str | None, slot: Slot) -> None:
        """A connection given ``slot`` closed."""
        if slot is Slot.REFUSED:
            return
        if slot is Slot.REGULAR:
            self.regular -= 1
        else:
            self.probe -= 1
        if key is not None:
            held = self._held[key]
            held[slot is Slot.PROBE] -= 1
            if held == [0, 0]:
                del self._held[key]

    def busy(self) -> bool:
        """Whether slots are running short (regular ones past ``busy_share``)."""
        busy_at = self.limits.busy_at
        return busy_at is not None and self.regular >= busy_at

    def became_busy(self) -> bool:
        """True once each time slots become busy (the caller then shortens the header
        deadlines of the connections already waiting); they must fall an eighth below
        the mark before it can be true again, so that a count hovering at the mark
        costs no pass over the connections per connection."""
        busy_at = self.limits.busy_at
        if busy_at is None:
            return False
        if self.regular >= busy_at:
            if not self._busy_noticed:
                self._busy_noticed = True
                return True
        elif self.regular < busy_at - max(1, busy_at // 8):
            self._busy_noticed = False
        return False

    def held_by(self, key: str) -> tuple[int, int]:
        """Regular and probe connections ``key`` holds."""
        held = self._held.get(key, (0, 0))
        return held[0], held[1]
