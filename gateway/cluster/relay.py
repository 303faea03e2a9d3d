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
import socket
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import urlsplit

import httptools
from starlette.types import Receive, Scope

from backends.core.errors import StorageError
from gateway.cluster.bodyseal import TAG_BYTES, update_mac
from gateway.cluster.errors import MemberUnavailable
from gateway.cluster.forward import ADMIN_PREFIX, HOPS, REQUEST_DROP
from gateway.cluster.peerauth import HEADER_BYTES, PeerAuth
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.transport import PeerTransport, peer_socket
from gateway.cluster.view import Member, Membership
from gateway.protocol.targets import object_target

log = logging.getLogger("squall.cluster")
#: a body larger than this waits for the owner's "100 Continue" (a refusal then costs
#: no upload, and is not lost to a connection the owner resets)
ASK_FIRST_BYTES = 64 * 1024
# What ClusterGateway drops, and the length the relay sets (it counts the body's tag).
_DROP = REQUEST_DROP | {b"content-length"}


class _Exchange(asyncio.Protocol):
    """One kept-alive connection to a member; one request and answer at a time. The
    answer's bytes go to ``client`` as they arrive; its framing is parsed only to know
    where it ends."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.client: Any = None  # the Downstream of the exchange in progress
        self.done: asyncio.Future[bool] | None = None  # the answer ended: keep-alive?
        self.asked: asyncio.Future[bool] | None = None  # 100 Continue (True) or an answer
        self.last_data = 0.0
        self.reusable = False
        self.stale = False  # taken from the idle ones: the member may have closed it
        self.timer: asyncio.TimerHandle | None = None  # the read timeout's
        self._parser: httptools.HttpResponseParser | None = None
        self._head = False
        self._status = 0  # of the answer being parsed
        self._drained: asyncio.Future[None] | None = None

    # -- a request ---------------------------------------------------------------------

    def begin(self, client: Any, head_request: bool, ask: bool) -> asyncio.Future[bool]:
        loop = asyncio.get_running_loop()
        self.client = client
        self.reusable = False
        self._head = head_request
        self._parser = httptools.HttpResponseParser(self)
        self.done = loop.create_future()
        self.asked = loop.create_future() if ask else None
        self.last_data = loop.time()
        assert self.transport is not None
        client.follow(self.transport)
        return self.done

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    async def drained(self) -> None:
        """Wait while the member does not take what was written."""
        if self._drained is not None:
            await asyncio.shield(self._drained)

    # -- asyncio -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        reason = str(exc) if exc else "the member closed the connection"
        for future in (self.asked, self.done):
            if future is not None and not future.done():
                future.set_exception(ConnectionResetError(reason))
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def data_received(self, data: bytes) -> None:
        parser, done = self._parser, self.done
        if parser is None or done is None or done.done():
            assert self.transport is not None
            self.transport.abort()  # bytes no request asked for
            return
        self.last_data = asyncio.get_running_loop().time()
        if self.client.gone:  # the rest of the answer would go nowhere
            done.set_exception(ConnectionResetError("the client went away"))
            assert self.transport is not None
            self.transport.abort()
            return
        asked = self.asked
        interim = asked is not None and not asked.done()
        if not interim:
            self.client.write(data)
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as exc:
            done.set_exception(ConnectionResetError(f"a malformed answer: {exc}"))
            assert self.transport is not None
            self.transport.abort()  # whatever else waits on this exchange ends too
            return
        if interim and asked is not None and not asked.done():
            asked.set_result(False)  # the owner's answer came instead of "100 Continue"
            self.client.write(data)

    # -- parser callbacks --------------------------------------------------------------

    def on_headers_complete(self) -> None:
        parser = self._parser
        assert parser is not None
        self._status = status = parser.get_status_code()
        asked = self.asked
        if 100 <= status < 200:
            if asked is not None and not asked.done():
                self._parser = httptools.HttpResponseParser(self)  # the answer follows
                asked.set_result(True)
            return
        if self._head:
            self._finish(parser.should_keep_alive())

    def on_message_complete(self) -> None:
        parser = self._parser
        if parser is not None and not 100 <= self._status < 200:  # not an interim answer
            self._finish(parser.should_keep_alive())

    def _finish(self, keep_alive: bool) -> None:
        done = self.done
        if done is not None and not done.done():
            self.reusable = keep_alive
            done.set_result(keep_alive)


class ClusterRelay:
    """The cluster's :class:`gateway.http.relaying.Router`: relays the object requests of
    keys other members own to their owners."""

    def __init__(self, *, membership: Membership, auth: PeerAuth, settings: ClusterSettings,
                 domain: str | None, on_forward: Callable[[str], None] | None = None) -> None:
        self._membership = membership
        self._auth = auth
        self._settings = settings
        self._domain = domain.lower() if domain else None
        self._idle: dict[str, list[_Exchange]] = {}
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
            exchange = await self._connect(member)
            try:
                return await self._exchange(exchange, member, scope, receive, client, head,
                                            marker, length, ask, first, more)
            except ConnectionResetError as exc:
                # a kept-alive connection the member closed as the request went out: sent
                # once more on a new connection, unless any of the answer was passed on
                if client.started or attempt or ask or more or not exchange.stale:
                    raise MemberUnavailable(member.name, str(exc)) from exc
        raise AssertionError("unreachable")

    async def _exchange(self, exchange: _Exchange, member: Member, scope: Scope,
                        receive: Receive, client: Any, head: bytes, marker: str,
                        length: int, ask: bool, first: bytes | None, more: bool) -> bool:
        done = exchange.begin(client, scope["method"] == "HEAD", ask)
        self._watch(exchange)
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
            if exchange.timer is not None:
                exchange.timer.cancel()
            client.follow(None)
            exchange.client = None
            self._release(member, exchange)

    async def _send_body(self, exchange: _Exchange, receive: Receive,
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

    def _watch(self, exchange: _Exchange) -> None:
        """Give the exchange up when the member sends nothing for the read timeout."""
        loop = asyncio.get_running_loop()
        timeout = self._settings.read_timeout_s

        def check() -> None:
            if loop.time() - exchange.last_data >= timeout and exchange.transport:
                exchange.transport.abort()
            else:
                exchange.timer = loop.call_at(exchange.last_data + timeout, check)
        exchange.timer = loop.call_later(timeout, check)

    # -- connections -------------------------------------------------------------------

    async def _connect(self, member: Member) -> _Exchange:
        idle = self._idle.get(member.name)
        while idle:
            exchange = idle.pop()
            if exchange.transport is not None and not exchange.transport.is_closing():
                exchange.stale = True
                return exchange
        exchange = await self._open(member)
        exchange.stale = False
        return exchange

    async def _open(self, member: Member) -> _Exchange:
        loop = asyncio.get_running_loop()
        url = urlsplit(member.host)
        port = url.port or 80
        try:
            async with asyncio.timeout(self._settings.connect_timeout_s):
                infos = await loop.getaddrinfo(url.hostname, port, type=socket.SOCK_STREAM)
                sock = peer_socket(infos[0])
                try:
                    sock.setblocking(False)
                    await loop.sock_connect(sock, infos[0][4])
                except BaseException:
                    sock.close()
                    raise
                _, exchange = await loop.create_connection(_Exchange, sock=sock)
        except (OSError, TimeoutError) as exc:
            raise PeerTransport.unavailable(member, exc) from exc
        return exchange

    def _release(self, member: Member, exchange: _Exchange) -> None:
        transport = exchange.transport
        if transport is None or transport.is_closing():
            return
        idle = self._idle.setdefault(member.name, [])
        if exchange.reusable and len(idle) < self._settings.connections_per_peer:
            idle.append(exchange)
        else:
            transport.close()

    def close(self) -> None:
        """Close the kept-alive connections."""
        idle, self._idle = self._idle, {}
        for exchanges in idle.values():
            for exchange in exchanges:
                if exchange.transport is not None:
                    exchange.transport.close()
