"""Forwarding as a byte relay: a request for a key another member owns goes to that
member as bytes over a kept-alive connection, and its answer comes back as bytes.

The HTTP protocol hands each parsed request head to :meth:`ClusterRelay.route`
(:mod:`gateway.http.relaying`); an object request whose key another member owns (in this
member's view) is relayed instead of being served: the request line and the client's
headers (``Host`` and ``Authorization`` included) with the peer marker added, then the
body as it arrives with its integrity tag (:mod:`gateway.cluster.bodyseal`). The owner
checks the client's signature, once; this member checks nothing and parses nothing of the
answer but its framing (to know where it ends): status line, headers and body reach the
client as the owner wrote them. A small request goes in one write. A body over
:data:`ASK_FIRST_BYTES` waits for the owner's ``100 Continue`` before any of it is sent.

What the relay does not take goes through :class:`gateway.cluster.forward.ClusterGateway`
as before: chunked uploads, HTTP/1.0, requests already forwarded, ``https://`` members,
bucket- and service-level requests.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import Callable
from typing import Any

from starlette.types import Receive, Scope

from backends.core.errors import StorageError
from gateway.cluster.bodyseal import TAG_BYTES, update_mac
from gateway.cluster.errors import MemberUnavailable
from gateway.cluster.exchange import Exchange, ExchangePool
from gateway.cluster.forward import ADMIN_PREFIX, HOPS, REQUEST_DROP
from gateway.cluster.peerauth import HEADER_BYTES, PeerAuth
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.view import Member, Membership
from gateway.protocol.targets import object_target

log = logging.getLogger("squall.cluster")
#: a body larger than this waits for the owner's "100 Continue" (a refusal then costs
#: no upload, and is not lost to a connection the owner resets)
ASK_FIRST_BYTES = 64 * 1024
# What ClusterGateway drops, and the length the relay sets (it counts the body's tag).
_DROP = REQUEST_DROP | {b"content-length"}


class ClusterRelay:
    """The cluster's :class:`gateway.http.relaying.Router`: relays the object requests of
    keys other members own to their owners."""

    def __init__(self, *, membership: Membership, auth: PeerAuth, settings: ClusterSettings,
                 domain: str | None, on_forward: Callable[[str], None] | None = None) -> None:
        self._membership = membership
        self._auth = auth
        self._settings = settings
        self._domain = domain.lower() if domain else None
        self._pool = ExchangePool(settings)
        self._on_forward = on_forward

    # -- which requests --------------------------------------------------------------------

    def route(self, scope: Scope) -> Member | None:
        """The owner of the request's key when another member owns it and the relay can
        take the request; None otherwise (the application serves or forwards it)."""
        if scope["path"].startswith(ADMIN_PREFIX) or scope["http_version"] != "1.1":
            return None
        host = b""
        for name, value in scope["headers"]:
            if name == b"host":
                host = value
            elif name == HEADER_BYTES or name == b"transfer-encoding":
                return None
        target = object_target(scope["raw_path"], host.decode("latin-1"), self._domain)
        if target is None:
            return None
        view = self._membership.view
        owner = view.owner(*target)
        if owner is None or owner == view.me:
            return None
        member = view.members[owner]
        return None if member.host.startswith("https://") else member

    # -- relaying ----------------------------------------------------------------------

    async def relay(self, member: Member, scope: Scope, receive: Receive,
                    client: Any) -> bool:
        """Send the request to ``member`` and its answer to ``client``; whether the
        client's connection stays open. MemberUnavailable when the member cannot be
        reached or the exchange breaks."""
        length = next((int(v) for n, v in scope["headers"]
                       if n == b"content-length" and v.isdigit()), 0)
        ask = length > ASK_FIRST_BYTES
        marker = self._auth.sign(scope["method"], scope["raw_path"], scope["query_string"],
                                 member.id, self._membership.view.token)
        head = self._head(scope, marker, length, ask)
        first: bytes | None = None
        more = False
        if length and not ask:  # a small body: read it now, send it with the head
            message = await receive()
            if message["type"] != "http.request":
                return False  # the client went away
            first, more = message.get("body", b""), bool(message.get("more_body"))
        if self._on_forward is not None:
            self._on_forward(member.name)
        try:
            return await self._send(member, scope, receive, client, head, marker, length,
                                    ask, first, more)
        except StorageError as exc:  # the detail: the client reads S3's words
            log.warning("relaying %s %s to %s: %s", scope["method"], scope["path"],
                        member.name, exc.message)
            raise

    async def _send(self, member: Member, scope: Scope, receive: Receive, client: Any,
                    head: bytes, marker: str, length: int, ask: bool, first: bytes | None,
                    more: bool) -> bool:
        for attempt in range(2):
            exchange = await self._pool.connect(member)
            try:
                return await self._exchange(exchange, member, scope, receive, client, head,
                                            marker, length, ask, first, more)
            except ConnectionResetError as exc:
                # a kept-alive connection the member closed as the request went out: sent
                # once more on a new connection, unless any of the answer was passed on
                if client.started or attempt or ask or more or not exchange.stale:
                    raise MemberUnavailable(member.name, str(exc)) from exc
        raise AssertionError("unreachable")

    async def _exchange(self, exchange: Exchange, member: Member, scope: Scope,
                        receive: Receive, client: Any, head: bytes, marker: str,
                        length: int, ask: bool, first: bytes | None, more: bool) -> bool:
        done = exchange.begin(client, scope["method"] == "HEAD", ask)
        self._pool.watch(exchange)
        try:
            if not length:
                exchange.write(head)
                return await done
            mac = hmac.new(self._auth.body_key(marker), digestmod=hashlib.sha256)
            if not ask:
                assert first is not None
                mac.update(first)
                exchange.write(head + first if more else head + first + mac.digest())
            else:
                exchange.write(head)
                assert exchange.asked is not None
                if not await exchange.asked:  # the owner answered without the body
                    await done
                    return False
            if more or ask:
                sending = asyncio.ensure_future(self._send_body(exchange, receive, mac))
                await asyncio.wait((sending, done), return_when=asyncio.FIRST_COMPLETED)
                if not sending.done():  # answered before the body was all sent
                    sending.cancel()
                    await done
                    return False
                sending.result()  # the client's disconnect ends the exchange too
            return await done
        except BaseException:
            exchange.reusable = False
            raise
        finally:
            client.follow(None)
            self._pool.finish(member, exchange)

    async def _send_body(self, exchange: Exchange, receive: Receive,
                         mac: hmac.HMAC) -> None:
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise ConnectionResetError("the client went away during the upload")
            chunk = message.get("body", b"")
            if chunk:
                await update_mac(mac, chunk)
                exchange.write(chunk)
                await exchange.drained()
            if not message.get("more_body"):
                exchange.write(mac.digest())
                return

    @staticmethod
    def _head(scope: Scope, marker: str, length: int, ask: bool) -> bytes:
        target = scope["raw_path"]
        if scope["query_string"]:
            target += b"?" + scope["query_string"]
        lines = [scope["method"].encode("ascii") + b" " + target + b" HTTP/1.1"]
        lines += [name + b": " + value for name, value in scope["headers"]
                  if name not in _DROP]
        lines.append(HEADER_BYTES + b": " + marker.encode("latin-1"))
        lines.append(HOPS + b": 1")
        if length:
            lines.append(b"content-length: " + str(length + TAG_BYTES).encode("ascii"))
        elif any(n == b"content-length" for n, _ in scope["headers"]):
            lines.append(b"content-length: 0")
        if ask:
            lines.append(b"expect: 100-continue")
        if any(n == b"connection" and b"close" in v.lower() for n, v in scope["headers"]):
            lines.append(b"connection: close")  # the owner's answer says so to the client
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._pool.close()
