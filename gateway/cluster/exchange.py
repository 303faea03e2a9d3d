"""Kept-alive HTTP/1.1 connections to other members, one request and answer at a time.

The byte relay (:mod:`gateway.cluster.relay`) passes a client's request and the owner's
answer through an :class:`Exchange` as bytes; the peer calls whose body is small and
whose answer is read whole (:meth:`gateway.cluster.transport.PeerTransport.call`) use the
same connections through :meth:`ExchangePool.request`, without an HTTP client library's
per-request work. An exchange parses of the answer only its framing (httptools).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

from gateway.cluster.errors import MemberUnavailable
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.view import Member

#: a peer that stops acknowledging what is sent (a cut link drops every packet) is given
#: up after this long, also while an answer is awaited: TCP keep-alive probes every second
#: on an idle connection, TCP_USER_TIMEOUT for data not acknowledged
DEAD_PEER_S = 4


def peer_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A socket to a member that finds a dead link within :data:`DEAD_PEER_S`, whether
    it is sending or waiting (also aiohttp's ``socket_factory``)."""
    family, kind, proto, _, _ = addr_info
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, DEAD_PEER_S - 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, DEAD_PEER_S * 1000)
    return sock


def describe_failure(exc: BaseException) -> str:
    """Why a member could not be reached, in a few words."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused or unreachable"
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Exchange(asyncio.Protocol):
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


class Answer:
    """A member's whole answer to :meth:`ExchangePool.request`: status, headers (names
    lower-case) and body. It is also the exchange's client while the answer arrives."""

    __slots__ = ("_data", "body", "headers", "status")

    def __init__(self) -> None:
        self._data: list[bytes] = []
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""

    # the exchange's client (the relay's Downstream has the same three)
    def write(self, data: bytes) -> None:
        self._data.append(data)

    def follow(self, upstream: asyncio.ReadTransport | None) -> None:
        pass

    gone = False

    @property
    def started(self) -> bool:
        return bool(self._data)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def parse(self) -> None:
        """Read status, headers and body from the bytes received (a complete answer)."""
        parser = httptools.HttpResponseParser(self)
        parser.feed_data(b"".join(self._data))
        self.status = parser.get_status_code()

    # parser callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self.body += body


class ExchangePool:
    """Idle exchanges kept per member (at most ``connections_per_peer`` each)."""

    def __init__(self, settings: ClusterSettings) -> None:
        self._settings = settings
        self._idle: dict[str, list[Exchange]] = {}

    async def request(self, member: Member, data: bytes, *, head_request: bool = False
                      ) -> Answer:
        """Send ``data`` (a whole request: head and body) to ``member`` and read its whole
        answer; sent once more on a new connection when a kept-alive one turns out closed
        before any of the answer came. MemberUnavailable if the exchange breaks."""
        for attempt in range(2):
            answer = Answer()
            exchange = await self.connect(member)
            done = exchange.begin(answer, head_request, False)
            self.watch(exchange)
            try:
                exchange.write(data)
                await done
            except ConnectionResetError as exc:
                exchange.reusable = False
                if answer.started or attempt or not exchange.stale:
                    raise MemberUnavailable(member.name, str(exc)) from exc
                continue
            except BaseException:
                exchange.reusable = False
                raise
            finally:
                self.finish(member, exchange)
            answer.parse()
            return answer
        raise AssertionError("unreachable")

    def watch(self, exchange: Exchange) -> None:
        """Give the exchange up when the member sends nothing for the read timeout."""
        loop = asyncio.get_running_loop()
        timeout = self._settings.read_timeout_s

        def check() -> None:
            if loop.time() - exchange.last_data >= timeout and exchange.transport:
                exchange.transport.abort()
            else:
                exchange.timer = loop.call_at(exchange.last_data + timeout, check)
        exchange.timer = loop.call_later(timeout, check)

    def finish(self, member: Member, exchange: Exchange) -> None:
        """The exchange in progress ended: stop its timer, keep it if it may serve again."""
        if exchange.timer is not None:
            exchange.timer.cancel()
        exchange.client = None
        self._release(member, exchange)

    async def connect(self, member: Member) -> Exchange:
        """An idle exchange with ``member`` (``stale``: it may have been closed by the
        member meanwhile), else a new one."""
        idle = self._idle.get(member.name)
        while idle:
            exchange = idle.pop()
            if exchange.transport is not None and not exchange.transport.is_closing():
                exchange.stale = True
                return exchange
        exchange = await self._open(member)
        exchange.stale = False
        return exchange

    async def _open(self, member: Member) -> Exchange:
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
                _, exchange = await loop.create_connection(Exchange, sock=sock)
        except (OSError, TimeoutError) as exc:
            raise MemberUnavailable(member.name, describe_failure(exc)) from exc
        return exchange

    def _release(self, member: Member, exchange: Exchange) -> None:
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
