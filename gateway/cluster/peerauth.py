"""Authentication of peer traffic: an HMAC (cluster secret) over the request line.

A member that forwards a request or calls a peer endpoint adds one header::

    x-squall-peer: v2:<sender>:<target>:<unix seconds>:<nonce>:<view>:<hex HMAC-SHA256>

``<sender>`` and ``<target>`` are member ids (:func:`gateway.cluster.view.member_id`),
``<view>`` the sender's view token (the etcd revision of its membership view, or the id
of a static member list). The HMAC covers the method, the raw path, the raw query and
every field, so a marker cannot be moved to another request or another member. The
receiver checks the view (:meth:`Membership.catch_up`), not here. The receiver refuses markers older or newer than the allowed
skew and, on peer endpoints, nonces it has already seen (a forwarded S3 request carries
the client's own SigV4 signature; replaying its marker could only make the owner serve
what it owns anyway, so no nonce is kept for it). Bodies carry a tag of their own, keyed
by the secret and the marker (:mod:`gateway.cluster.bodyseal`).
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import itertools
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from backends.core.numbers import natural
from gateway.cluster.bodyseal import body_key
from gateway.cluster.errors import PeerAuthFailed

HEADER = "x-squall-peer"
HEADER_BYTES = HEADER.encode()
VERSION = "v2"


@dataclass(frozen=True, slots=True)
class Marker:
    """A verified peer marker: who sent it, and the view it was signed under."""

    sender: str  # member id
    view: str


class PeerAuth:
    """Signs this member's peer requests and verifies the ones it receives."""

    def __init__(self, secret: bytes, *, member: str, max_skew_s: float = 30.0,
                 clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self.member = member  # this member's id
        self._skew = max_skew_s
        self._clock = clock
        self._seen: dict[tuple[str, str], float] = {}
        self._nonces = secrets.token_hex(6)  # this run's nonces start with it
        self._count = itertools.count()
        self._expiry: collections.deque[tuple[float, tuple[str, str]]] = collections.deque()

    def _mac(self, method: str, path: bytes, query: bytes, fields: str) -> str:
        message = b"\n".join((VERSION.encode(), method.encode(), path, query, fields.encode()))
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def sign(self, method: str, path: bytes, query: bytes, target: str, view: str) -> str:
        """The header value for a request from this member to member id ``target``,
        under the view whose token is ``view``."""
        nonce = f"{self._nonces}{next(self._count):x}"  # unique per run: no random draw
        fields = f"{self.member}:{target}:{int(self._clock())}:{nonce}:{view}"
        return f"{VERSION}:{fields}:{self._mac(method, path, query, fields)}"

    def verify(self, method: str, path: bytes, query: bytes, value: str, *,
               once: bool = True) -> Marker:
        """The sender and its view; PeerAuthFailed otherwise. ``once``: refuse a nonce
        seen before."""
        parts = value.split(":")
        if len(parts) != 7 or parts[0] != VERSION:
            raise PeerAuthFailed("The cluster peer header is malformed (or from a member "
                                 "running another version).")
        _, sender, target, stamp, nonce, view, mac = parts
        fields = ":".join(parts[1:6])
        if not hmac.compare_digest(self._mac(method, path, query, fields), mac):
            raise PeerAuthFailed("The cluster peer signature does not match (wrong "
                                 "cluster secret, or not sent by a member).")
        when = natural(stamp)
        if when is None:
            raise PeerAuthFailed("The cluster peer header is malformed.")
        if target != self.member:
            raise PeerAuthFailed("The cluster peer signature is for another member.")
        now = self._clock()
        if abs(now - when) > self._skew:
            raise PeerAuthFailed("The cluster peer signature has expired (or the members' "
                                 "clocks differ by more than "
                                 f"{self._skew:.0f} s).")
        marker = Marker(sender, view)
        if not once:
            return marker
        self._forget(now)
        seen = (sender, nonce)
        if seen in self._seen:
            raise PeerAuthFailed("The cluster peer signature was already used.")
        self._seen[seen] = now + 2 * self._skew
        self._expiry.append((now + 2 * self._skew, seen))
        return marker

    def body_key(self, marker: str) -> bytes:
        """The key of the body tag of the request carrying ``marker`` (bodyseal)."""
        return body_key(self._secret, marker)

    def _forget(self, now: float) -> None:
        while self._expiry and self._expiry[0][0] < now:
            _, seen = self._expiry.popleft()
            self._seen.pop(seen, None)


def marker_target(value: str) -> str | None:
    """The member id a peer marker is signed for (not verified), None when malformed."""
    parts = value.split(":")
    return parts[2] if len(parts) == 7 else None
