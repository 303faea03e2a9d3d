"""Authentication of peer traffic: an HMAC (cluster secret) over the request line.

A member that forwards a request or calls a peer endpoint adds one header::

    x-squall-peer: v1:<sender>:<target>:<unix seconds>:<nonce>:<ring id>:<hex HMAC-SHA256>

The HMAC covers the method, the raw path, the raw query, the timestamp, the nonce, both
node ids and the ring id, so a marker cannot be moved to another request, another member
or another cluster layout. The receiver refuses markers older or newer than the allowed
skew and, on peer endpoints, nonces it has already seen (a forwarded S3 request carries
the client's own SigV4 signature; replaying its marker could only make the owner serve
what it owns anyway, so no nonce is kept for it). Bodies carry a tag of their own, keyed
by the secret and the marker (:mod:`gateway.cluster.bodyseal`).
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

from backends.numbers import natural
from gateway.cluster.bodyseal import body_key
from gateway.cluster.errors import PeerAuthFailed, RingMismatch

HEADER = "x-squall-peer"
HEADER_BYTES = HEADER.encode()
VERSION = "v1"


class PeerAuth:
    """Signs this node's peer requests and verifies the ones it receives."""

    def __init__(self, secret: bytes, *, ring_id: str, self_index: int,
                 max_skew_s: float = 30.0, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self._ring_id = ring_id
        self._self = self_index
        self._skew = max_skew_s
        self._clock = clock
        self._seen: dict[tuple[int, str], float] = {}
        self._expiry: collections.deque[tuple[float, tuple[int, str]]] = collections.deque()

    def _mac(self, method: str, path: bytes, query: bytes, fields: str) -> str:
        message = b"\n".join((VERSION.encode(), method.encode(), path, query, fields.encode()))
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def sign(self, method: str, path: bytes, query: bytes, target: int,
             ring_id: str | None = None) -> str:
        """The header value for a request from this node to member ``target`` (``ring_id``:
        the member list the target has, when it differs from ours: a joining member)."""
        fields = f"{self._self}:{target}:{int(self._clock())}:{secrets.token_hex(8)}:" \
                 f"{ring_id or self._ring_id}"
        return f"{VERSION}:{fields}:{self._mac(method, path, query, fields)}"

    def verify(self, method: str, path: bytes, query: bytes, value: str, *,
               once: bool = True) -> int:
        """The sender's node id; PeerAuthFailed (or RingMismatch) otherwise. ``once``:
        refuse a nonce seen before."""
        parts = value.split(":")
        if len(parts) != 7 or parts[0] != VERSION:
            raise PeerAuthFailed("The cluster peer header is malformed.")
        _, sender, target, stamp, nonce, ring_id, mac = parts
        fields = ":".join(parts[1:6])
        if not hmac.compare_digest(self._mac(method, path, query, fields), mac):
            raise PeerAuthFailed("The cluster peer signature does not match (wrong "
                                 "cluster secret, or not sent by a member).")
        if ring_id != self._ring_id:
            raise RingMismatch(f"cluster members disagree on the member list (ring "
                               f"{ring_id} from node {sender}, {self._ring_id} here); give "
                               "every member the same --peers (and --workers N)")
        member, to, when = natural(sender), natural(target), natural(stamp)
        if member is None or to is None or when is None:
            raise PeerAuthFailed("The cluster peer header is malformed.")
        if to != self._self:
            raise PeerAuthFailed("The cluster peer signature is for another member.")
        now = self._clock()
        if abs(now - when) > self._skew:
            raise PeerAuthFailed("The cluster peer signature has expired (or the members' "
                                 "clocks differ by more than "
                                 f"{self._skew:.0f} s).")
        if not once:
            return member
        self._forget(now)
        seen = (member, nonce)
        if seen in self._seen:
            raise PeerAuthFailed("The cluster peer signature was already used.")
        self._seen[seen] = now + 2 * self._skew
        self._expiry.append((now + 2 * self._skew, seen))
        return member

    def rebind(self, ring_id: str, self_index: int) -> None:
        """The member list changed (live membership): sign and verify with the new one."""
        self._ring_id, self._self = ring_id, self_index

    def body_key(self, marker: str) -> bytes:
        """The key of the body tag of the request carrying ``marker`` (bodyseal)."""
        return body_key(self._secret, marker)

    def _forget(self, now: float) -> None:
        while self._expiry and self._expiry[0][0] < now:
            _, seen = self._expiry.popleft()
            self._seen.pop(seen, None)


def marker_ring(value: str) -> str | None:
    """The ring id a peer marker names (not verified), None when it is malformed."""
    parts = value.split(":")
    return parts[5] if len(parts) == 7 else None


def marker_target(value: str) -> int | None:
    """The member a peer marker is signed for (not verified), None when malformed."""
    parts = value.split(":")
    return natural(parts[2]) if len(parts) == 7 else None
