"""Cluster settings: a fixed member list or a coordinator, which member this one is, and
the shared secret."""

from __future__ import annotations

import socket
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.cluster.coordinator.settings import CoordinatorSettings
from gateway.cluster.ring import Ring, normalize_url
from gateway.cluster.view import Member

MIN_SECRET_LENGTH = 16


def split_peers(value: object) -> object:
    """``URL0,URL1,...`` (CLI flag, ``SQUALL_PEERS``) as a list; lists pass unchanged."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def check_peers(peers: Sequence[str]) -> list[str]:
    """Normalised peer URLs; ValueError for a malformed or repeated one."""
    members = [normalize_url(p) for p in peers]
    repeated = sorted({m for m in members if members.count(m) > 1})
    if repeated:
        raise ValueError(f"peer URL(s) listed more than once: {', '.join(repeated)}")
    return members


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """A member's cluster: a static member list (``ring``) or a coordinator, never both."""

    secret: bytes
    #: the fixed member list (--peers, or the workers of one host); None with etcd
    ring: Ring | None = None
    #: etcd (--coordinator); None with a fixed list
    coordinator: CoordinatorSettings | None = None
    #: with a coordinator: where this member is reached, and its worker of how many
    advertise_url: str = ""
    worker: int = 0
    workers: int = 1
    connect_timeout_s: float = 2.0
    # Forwarded requests and peer calls may wait on a slow backend or on backpressure.
    read_timeout_s: float = 600.0
    max_skew_s: float = 30.0
    connections_per_peer: int = 128
    #: PEM CA certificates trusted for https:// members, besides the system's
    peer_ca: Path | None = None
    #: members holding each unflushed write (the owner and R-1 mirrors)
    dirty_replicas: int = 1
    #: where this member keeps its mirror copies (``<data dir>/mirror``)
    mirror_dir: Path | None = None
    #: where this member keeps its lease id across restarts (``<data dir>/cluster``)
    state_file: Path | None = None

    @property
    def name(self) -> str:
        """This member's name in the ring."""
        if self.ring is not None:
            return self.ring.self_url
        return Member.of(self.advertise_url, self.worker, self.workers).name


def find_self(members: Sequence[str], names: Sequence[str]) -> int:
    """The index of the member whose host is one of ``names`` (hostname, FQDN), also
    by first label (a StatefulSet pod ``squall-0`` is ``squall-0.squall-headless...``)."""
    wanted = {n.lower() for n in names if n}
    wanted |= {n.split(".", 1)[0] for n in wanted}
    matches = []
    for index, member in enumerate(members):
        host = (urllib.parse.urlsplit(member).hostname or "").lower()
        if host in wanted or (host.split(".", 1)[0] in wanted and not _is_ip(host)):
            matches.append(index)
    if len(matches) != 1:
        found = "none" if not matches else ", ".join(members[i] for i in matches)
        raise ValueError(f"cannot tell which peer this node is (host names "
                         f"{', '.join(sorted(set(names)))} match {found}); "
                         "pass --node-id K (SQUALL_NODE_ID)")
    return matches[0]


def _is_ip(host: str) -> bool:
    return host.replace(".", "").isdigit() or ":" in host


def cluster_settings(peers: Sequence[str], node_id: int | None,
                     secret: str | None, *, peer_ca: Path | None = None,
                     dirty_replicas: int | None = None, mirror_dir: Path | None = None,
                     state_file: Path | None = None,
                     coordinator: CoordinatorSettings | None = None,
                     advertise_url: str | None = None,
                     host_worker: tuple[int, int] = (0, 1)) -> ClusterSettings | None:
    """The cluster this member belongs to, None for a gateway on its own; ValueError with
    a message a user can act on for an inconsistent combination. ``host_worker``: (this
    worker, workers per host) when every member runs ``--workers N`` (docs/workers.md,
    "Clusters of workers")."""
    worker, count = host_worker
    if secret is not None and len(secret) < MIN_SECRET_LENGTH:
        raise ValueError(f"--cluster-secret must be at least {MIN_SECRET_LENGTH} "
                         "characters long")
    if coordinator is not None:
        if peers or node_id is not None:
            raise ValueError("give --coordinator (etcd) or a fixed --peers list, not both")
        if not secret:
            raise ValueError("--cluster-secret (SQUALL_CLUSTER_SECRET) is required with "
                             "--coordinator: it authenticates the members to each other")
        if advertise_url is None:
            raise ValueError("a member needs the URL the others reach it at: "
                             "--advertise-url URL (or a --listen address that is not a "
                             "wildcard)")
        replicas = 2 if dirty_replicas is None else dirty_replicas
        return ClusterSettings(secret=secret.encode(), coordinator=coordinator,
                               advertise_url=normalize_url(advertise_url), worker=worker,
                               workers=count, peer_ca=peer_ca, dirty_replicas=replicas,
                               mirror_dir=mirror_dir, state_file=state_file)
    if not peers:
        if node_id is not None:
            raise ValueError("--node-id needs --peers (the ordered member list)")
        if dirty_replicas not in (None, 1):
            raise ValueError("--dirty-replicas above 1 needs --coordinator (the members "
                             "that keep the copies take a lost member's keys over)")
        return None
    members = check_peers(peers)
    if dirty_replicas not in (None, 1):
        raise ValueError("--dirty-replicas above 1 needs --coordinator: with a fixed "
                         "--peers list a member's keys never move, so copies would never "
                         "be used (docs/cluster.md)")
    if node_id is None:
        node_id = find_self(members, [socket.gethostname(), socket.getfqdn()])
    if not 0 <= node_id < len(members):
        raise ValueError(f"--node-id {node_id} is not an index into the {len(members)} "
                         f"peers (0..{len(members) - 1})")
    if len(members) > 1 and not secret:
        raise ValueError("--cluster-secret (SQUALL_CLUSTER_SECRET) is required when "
                         "--peers lists more than one member")
    return ClusterSettings(secret=(secret or "").encode(),
                           ring=Ring.of_hosts(members, node_id, count, worker),
                           peer_ca=peer_ca, mirror_dir=mirror_dir, state_file=state_file)
