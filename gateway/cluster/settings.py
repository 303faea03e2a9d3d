"""Cluster settings: the member list, which member this node is, and the shared secret."""

from __future__ import annotations

import re
import socket
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.cluster.ring import Ring, normalize_url

MIN_SECRET_LENGTH = 16
_SEPARATORS = re.compile(r"[\s,]+")


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


def read_members(path: Path) -> tuple[str, ...]:
    """The member URLs a member file (``--peers-file``) lists, normalised: separated by
    commas, spaces or new lines, ``#`` starting a comment. ValueError or OSError."""
    text = path.read_text(encoding="utf-8")
    urls = [u for line in text.splitlines()
            for u in _SEPARATORS.split(line.split("#", 1)[0]) if u]
    if not urls:
        raise ValueError(f"{path} lists no member")
    return tuple(check_peers(urls))


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    ring: Ring
    secret: bytes
    health_interval_s: float = 2.0
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
    #: where the member list of the last live change is kept (``<data dir>``)
    membership_file: Path | None = None
    #: started to join a running cluster: serves nothing until added (``squall cluster add``)
    join: bool = False
    #: the watched member list the members came from (``--peers-file``), if any
    peers_file: Path | None = None


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
                     membership_file: Path | None = None, join: bool = False,
                     peers_file: Path | None = None,
                     host_worker: tuple[int, int] = (0, 1)) -> ClusterSettings | None:
    """The cluster this node belongs to, None without peers; ValueError with a message
    a user can act on for an inconsistent combination. ``peers_file``: the members are
    read from it (instead of ``peers``). ``host_worker``: (this worker, workers per host)
    when every member runs ``--workers N`` (docs/workers.md, "Clusters of workers")."""
    if peers_file is not None:
        if peers:
            raise ValueError("give --peers or --peers-file, not both")
        try:
            peers = read_members(peers_file)
        except OSError as exc:
            raise ValueError(f"--peers-file {peers_file}: {exc.strerror}") from None
    if not peers:
        if node_id is not None:
            raise ValueError("--node-id needs --peers (the ordered member list)")
        if dirty_replicas not in (None, 1):
            raise ValueError("--dirty-replicas above 1 needs --peers (the members that "
                             "keep the copies)")
        return None
    members = check_peers(peers)
    # With a member file the list grows and shrinks: R is kept for when the members are
    # enough (a single member keeps no copies meanwhile).
    growing = peers_file is not None
    replicas = dirty_replicas if dirty_replicas is not None else \
        2 if growing else min(2, len(members))
    if not 1 <= replicas <= (replicas if growing else len(members)):
        raise ValueError(f"--dirty-replicas must be between 1 and the number of members "
                         f"({len(members)}), not {replicas}")
    if node_id is None:
        node_id = find_self(members, [socket.gethostname(), socket.getfqdn()])
    if not 0 <= node_id < len(members):
        raise ValueError(f"--node-id {node_id} is not an index into the {len(members)} "
                         f"peers (0..{len(members) - 1})")
    if len(members) > 1 and not secret:
        raise ValueError("--cluster-secret (SQUALL_CLUSTER_SECRET) is required when "
                         "--peers lists more than one member")
    if secret is not None and len(secret) < MIN_SECRET_LENGTH:
        raise ValueError(f"--cluster-secret must be at least {MIN_SECRET_LENGTH} "
                         "characters long")
    worker, count = host_worker
    return ClusterSettings(ring=Ring.of_hosts(members, node_id, count, worker),
                           secret=(secret or "").encode(), peer_ca=peer_ca,
                           dirty_replicas=replicas, mirror_dir=mirror_dir,
                           membership_file=membership_file, join=join,
                           peers_file=peers_file)
