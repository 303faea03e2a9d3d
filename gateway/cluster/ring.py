"""Ownership: rendezvous (highest random weight) hashing of (bucket, key) over members.

Pure, standard library only: the server, ``gateway.cluster.client`` and any other client
compute the same owner from the member list ``GET /_squall/cluster`` returns.

The weight of member ``m`` for a key is the first 8 bytes (big-endian) of
``blake2b(m + "\\0" + bucket + "\\0" + routing_key(key))`` over UTF-8, where ``m`` is the
member's normalised URL; the member with the highest weight owns the key (ties, which
need a 64-bit collision, go to the greater URL). Adding or removing one member moves only
the keys it gains or loses.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from backends.internal_keys import split_record

HASH_NAME = "rendezvous-blake2b64"


def routing_key(key: str) -> str:
    """The key whose owner stores ``key``: the key itself, except for the versioning
    layer's records (:mod:`backends.internal_keys`), which live with their user key."""
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


def fingerprint(members: Sequence[str]) -> str:
    """A short id of the ordered member list; members must agree on it to talk."""
    return hashlib.blake2b("\n".join(members).encode(), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class Ring:
    """The ordered member list (normalised URLs) and this node's index in it."""

    members: tuple[str, ...]
    self_index: int

    def __post_init__(self) -> None:
        if not self.members:
            raise ValueError("a ring needs at least one member")
        if len(set(self.members)) != len(self.members):
            raise ValueError("peer URLs must be distinct")
        if not 0 <= self.self_index < len(self.members):
            raise ValueError(f"node id {self.self_index} is not an index into the "
                             f"{len(self.members)} peers (0..{len(self.members) - 1})")

    @classmethod
    def of(cls, urls: Sequence[str], self_index: int) -> Ring:
        return cls(tuple(normalize_url(u) for u in urls), self_index)

    @property
    def id(self) -> str:
        return fingerprint(self.members)

    @property
    def self_url(self) -> str:
        return self.members[self.self_index]

    def owner(self, bucket: str, key: str) -> int:
        return owner_index(self.members, bucket, key)

    def owns(self, bucket: str, key: str) -> bool:
        return len(self.members) == 1 or self.owner(bucket, key) == self.self_index
