"""Ownership: rendezvous (highest random weight) hashing of (bucket, key) over members.

Pure, standard library only: the server, ``gateway.cluster.client`` and any other client
compute the same owner from the member list ``GET /_squall/cluster`` returns.

The weight of member ``m`` for a key is the first 8 bytes (big-endian) of
``blake2b(m + "\\0" + bucket + "\\0" + routing_key(key))`` over UTF-8, where ``m`` is the
member's normalised URL; the member with the highest weight owns the key (ties, which
need a 64-bit collision, go to the greater URL). Adding or removing one member moves only
the keys it gains or loses.

Members that run ``--workers N`` (N processes per host, docs/workers.md) make a ring of
N members per host, named ``<host URL>/worker-<k>``: the owner is found in two steps, the
host by the weights of the host URLs (exactly as above, so a client that knows only the
hosts finds the right one), then the worker of that host by the weights of the names
``worker-<k>``, the same on every host.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field

from backends.core.internal_keys import split_record

HASH_NAME = "rendezvous-blake2b64"


def routing_key(key: str) -> str:
    """The key whose owner stores ``key``: the key itself, except for the versioning
    layer's records (:mod:`backends.core.internal_keys`), which live with their user key."""
    record = split_record(key)
    return key if record is None else record[0]


def normalize_url(url: str) -> str:
    """``scheme://host[:port]`` with scheme and host in lower case; ValueError otherwise."""
    text = url.strip()
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"peer URL {url!r} is not valid: {exc}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"peer URL {url!r} must look like http://HOST:PORT")
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"peer URL {url!r} must be a base URL (no path, query or user)")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port is not None else "")


def weight(member: str, bucket: str, rkey: str) -> int:
    data = f"{member}\0{bucket}\0{rkey}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def owner_index(members: Sequence[str], bucket: str, key: str) -> int:
    """Index in ``members`` (normalised URLs) of the owner of ``(bucket, key)``."""
    rkey = routing_key(key)
    best, best_index = (-1, ""), 0
    for index, member in enumerate(members):
        score = (weight(member, bucket, rkey), member)
        if score > best:
            best, best_index = score, index
    return best_index


def worker_index(workers: int, bucket: str, key: str) -> int:
    """Which of a host's ``workers`` owns ``(bucket, key)`` there."""
    rkey = routing_key(key)
    return max(range(workers), key=lambda k: (weight(f"worker-{k}", bucket, rkey), k))


def worker_member(host_url: str, worker: int) -> str:
    """The ring name of worker ``worker`` of the member at ``host_url``."""
    return f"{host_url}/worker-{worker}"


def fingerprint(members: Sequence[str]) -> str:
    """A short id of the ordered member list; members must agree on it to talk."""
    return hashlib.blake2b("\n".join(members).encode(), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class Ring:
    """The ordered member list (normalised URLs) and this node's index in it.

    ``workers`` > 1: the members are the hosts' workers, host after host (member ``i``
    is worker ``i % workers`` of host ``i // workers``, see :func:`worker_member`)."""

    members: tuple[str, ...]
    self_index: int
    workers: int = 1
    #: the hosts' URLs, in member order (the members themselves with one worker each)
    hosts: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.members:
            raise ValueError("a ring needs at least one member")
        if len(set(self.members)) != len(self.members):
            raise ValueError("peer URLs must be distinct")
        if not 0 <= self.self_index < len(self.members):
            raise ValueError(f"node id {self.self_index} is not an index into the "
                             f"{len(self.members)} peers (0..{len(self.members) - 1})")
        if self.workers < 1 or len(self.members) % self.workers:
            raise ValueError(f"{len(self.members)} members are not hosts of "
                             f"{self.workers} workers")
        hosts = self.members if self.workers == 1 else tuple(
            self.url_of(i) for i in range(0, len(self.members), self.workers))
        object.__setattr__(self, "hosts", hosts)

    @classmethod
    def of(cls, urls: Sequence[str], self_index: int) -> Ring:
        return cls(tuple(normalize_url(u) for u in urls), self_index)

    @classmethod
    def of_hosts(cls, hosts: Sequence[str], host: int, workers: int, worker: int) -> Ring:
        """Worker ``worker`` of host ``host`` in a ring of ``hosts`` (normalised URLs)
        running ``workers`` workers each (one: the hosts themselves are the members)."""
        if workers == 1:
            return cls(tuple(hosts), host)
        if not 0 <= worker < workers:
            raise ValueError(f"worker {worker} is not one of {workers}")
        members = tuple(worker_member(h, k) for h in hosts for k in range(workers))
        return cls(members, host * workers + worker, workers)

    def url_of(self, member: int) -> str:
        """The URL member ``member`` is reached at (its host's, with workers)."""
        name = self.members[member]
        return name if self.workers == 1 else name.rsplit("/", 1)[0]

    @property
    def id(self) -> str:
        return fingerprint(self.members)

    @property
    def self_url(self) -> str:
        return self.members[self.self_index]

    def owner(self, bucket: str, key: str) -> int:
        if self.workers == 1:
            return owner_index(self.members, bucket, key)
        host = owner_index(self.hosts, bucket, key)
        return host * self.workers + worker_index(self.workers, bucket, key)

    def owns(self, bucket: str, key: str) -> bool:
        return len(self.members) == 1 or self.owner(bucket, key) == self.self_index
