"""Connections to the other members: keep-alive pools, streaming both ways.

aiohttp's client (already installed with aiobotocore): its C parser keeps a forwarded
request cheap, and with ``encoded=True`` URLs it sends the request target byte for byte
(httpx re-quotes paths and drops ``.``/``..`` segments, which are legal in S3 keys and
covered by the client's signature). Automatic headers are switched off: the owner must
see the client's headers, and only those (plus the peer marker). The workers of one host
(``--workers N``) reach each other through Unix sockets (:meth:`use_unix_sockets`); the
workers of other hosts are reached at their host's URL (the peer marker names the
worker).
``https://`` members are verified against the system's CAs and ``--peer-ca``. Members
are named, not numbered: the member list changes while the cluster runs.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence

import aiohttp
from yarl import URL

from gateway.client.tls import client_context
from gateway.cluster.bodyseal import TAG_BYTES, body_key, seal, sealed
from gateway.cluster.errors import MemberUnavailable
from gateway.cluster.exchange import Answer, ExchangePool, describe_failure, peer_socket
from gateway.cluster.peerauth import HEADER, PeerAuth
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.view import Member

TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)
# Errors after which a request without a body is sent once more on a new connection
# (a keep-alive connection the peer closed as the request went out).
_STALE = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)
_NO_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
#: Largest response header a member accepts from a peer (aiohttp's default is 8190). An
#: object's info travels in one header as ASCII JSON: S3 bounds what it holds (2 KB of
#: user metadata, 8 KB of request headers, 10 tags), and escaping at most triples it.
PEER_MAX_FIELD_BYTES = 64 * 1024
#: a body up to this size may go with its request's head (:meth:`PeerTransport.call`)
DIRECT_BODY_BYTES = 64 * 1024


def _describe(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connection refused or unreachable"
    return describe_failure(exc)


class PeerResponse:
    """A member's answer: status, raw headers, and a body read through :meth:`body`.
    Always closed with :meth:`aclose` (the connection is reused if the body was read)."""

    __slots__ = ("_response", "headers", "status")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers: list[tuple[bytes, bytes]] = list(response.raw_headers)

    def header(self, name: str) -> str | None:
        return self._response.headers.get(name)

    async def chunks(self) -> AsyncIterator[bytes]:
        # Pieces as received (iter_any would join what is buffered: one more copy). Not
        # iter_chunks: on the shared empty payload of a HEAD answer it never ends.
        content = self._response.content
        while True:
            chunk, _ = await content.readchunk()
            if chunk:
                yield chunk
            elif content.at_eof():
                return

    async def aclose(self) -> None:
        self._response.release()


class PeerTransport:
    """Sends signed requests to members by name; errors become MemberUnavailable."""

    def __init__(self, settings: ClusterSettings, auth: PeerAuth) -> None:
        self._settings = settings
        self._auth = auth
        self._unix: dict[str, str] = {}
        # One session for TCP members; one per member reached through a Unix socket
        # (aiohttp's UnixConnector has one path), and one per worker of another host
        # (a connection is handed to the worker it is signed for, and stays with it).
        # Made on the event loop, at first use.
        self._sessions: dict[str | None, aiohttp.ClientSession] = {}
        self._exchanges = ExchangePool(settings)
        self._timeout = aiohttp.ClientTimeout(total=None,
                                              sock_connect=settings.connect_timeout_s,
                                              sock_read=settings.read_timeout_s)

    def use_unix_sockets(self, paths: Mapping[str, str]) -> None:
        """Reach these members (by name) through their Unix socket paths instead of
        their URLs (the workers of one host, docs/workers.md); the URLs stay their names
        in the ring, in the peer marker and in ``Host``. Call before the first request."""
        if self._sessions:
            raise RuntimeError("use_unix_sockets() after the first request")
        self._unix = dict(paths)

    @property
    def local_workers(self) -> bool:
        """Whether the members are the workers of one host (Unix sockets)."""
        return bool(self._unix)

    def _client(self, member: Member) -> aiohttp.ClientSession:
        path = self._unix.get(member.name)
        slot = member.name if path is not None or member.workers > 1 else None
        session = self._sessions.get(slot)
        if session is None:
            connector: aiohttp.BaseConnector
            if path is not None:
                connector = aiohttp.UnixConnector(
                    path=path, limit=self._settings.connections_per_peer,
                    keepalive_timeout=30.0)
            else:
                connector = aiohttp.TCPConnector(
                    limit=0, limit_per_host=self._settings.connections_per_peer,
                    keepalive_timeout=30.0, ttl_dns_cache=10,
                    ssl=self._ssl(member), socket_factory=peer_socket)
            session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, timeout=self._timeout,
                skip_auto_headers=_NO_AUTO_HEADERS, max_field_size=PEER_MAX_FIELD_BYTES)
            self._sessions[slot] = session
        return session

    def _ssl(self, member: Member) -> ssl.SSLContext | bool:
        """The TLS context of the TCP session: made (loading the system's CAs costs a
        tenth of a second of CPU) only for ``--peer-ca`` or an ``https://`` member;
        otherwise aiohttp's default, which verifies against the same system CAs."""
        if self._settings.peer_ca is None and not member.host.startswith("https://"):
            return True
        return client_context(self._settings.peer_ca)

    @staticmethod
    def unavailable(member: Member, exc: BaseException) -> MemberUnavailable:
        return MemberUnavailable(member.name, _describe(exc))

    async def open(self, member: Member, method: str, path: bytes, query: bytes = b"", *,
                   view: str, headers: Sequence[tuple[bytes, bytes]] = (),
                   content: AsyncIterable[bytes] | bytes | None = None,
                   timeout: float | None = None,  # noqa: ASYNC109  aiohttp socket timeouts
                   wait_continue: bool = True) -> PeerResponse:
        """Send a request signed for ``member`` under the view ``view`` (a streamed body
        without a content-length goes chunked; ``bytes`` go whole, with the head); the
        caller closes the streamed response.

        A body is sent with its integrity tag (:mod:`gateway.cluster.bodyseal`), after
        the member's ``100 Continue`` unless ``wait_continue`` is false (a call the
        member does not refuse before reading its body saves a round trip).
        MemberUnavailable if the member cannot be reached or the exchange breaks; other
        exceptions (from ``content``) propagate unchanged.
        """
        target = path.decode("latin-1")
        if query:
            target += "?" + query.decode("latin-1")
        url = URL(member.host + target, encoded=True)
        marker = self._auth.sign(method, path, query, member.id, view)
        sent = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers]
        if isinstance(content, bytes):  # the body ends with its tag (bodyseal)
            content = sealed(content, body_key(self._settings.secret, marker))
            sent = [(n, v) for n, v in sent if n.lower() != "content-length"]
            sent.append(("content-length", str(len(content))))
        elif content is not None:
            content = seal(content, body_key(self._settings.secret, marker))
            sent = [(n, str(int(v) + TAG_BYTES) if n.lower() == "content-length" else v)
                    for n, v in sent]
        sent.append((HEADER, marker))
        if not any(n == b"host" for n, _ in headers):
            sent.append(("host", member.host.split("://", 1)[1]))
        request_timeout = self._timeout if timeout is None else aiohttp.ClientTimeout(
            total=None, sock_connect=min(timeout, self._settings.connect_timeout_s),
            sock_read=timeout)
        attempts = 1 if content is not None else 2
        for attempt in range(attempts):
            try:
                # A body waits for "100 Continue": a member that refuses the request
                # first (a bad signature, no such bucket) answers before any of it is
                # sent, and the answer is not lost to a reset connection.
                response = await self._client(member).request(
                    method, url, headers=sent, data=content, allow_redirects=False,
                    timeout=request_timeout, compress=None,
                    expect100=content is not None and wait_continue)
                return PeerResponse(response)
            except TRANSPORT_ERRORS as exc:
                if isinstance(exc, _STALE) and attempt + 1 < attempts:
                    continue
                raise self.unavailable(member, exc) from exc
        raise AssertionError("unreachable")

    def direct(self, member: Member, content: bytes | None) -> bool:
        """Whether :meth:`call` can take a request with ``content`` to ``member``: a
        plain ``http://`` member reached over TCP, a body small enough to go with the
        head."""
        return (member.name not in self._unix and member.host.startswith("http://")
                and (content is None or len(content) <= DIRECT_BODY_BYTES))

    async def call(self, member: Member, method: str, path: bytes, query: bytes = b"", *,
                   view: str, headers: Sequence[tuple[bytes, bytes]] = (),
                   content: bytes | None = None) -> Answer:
        """Send a request (signed and sealed as :meth:`open` does) whose body goes in one
        write with its head, over the kept-alive connections of :mod:`exchange`, and
        read the whole answer: a peer call without an HTTP client library's work per
        request. Only where :meth:`direct` says so. MemberUnavailable as for :meth:`open`."""
        target = path + b"?" + query if query else path
        marker = self._auth.sign(method, path, query, member.id, view)
        lines = [method.encode("ascii") + b" " + target + b" HTTP/1.1",
                 b"host: " + member.host.split("://", 1)[1].encode("latin-1"),
                 HEADER.encode() + b": " + marker.encode("latin-1")]
        lines += [name + b": " + value for name, value in headers
                  if name.lower() not in (b"host", b"content-length")]
        body = b""
        if content is not None:  # the body ends with its tag (bodyseal)
            body = sealed(content, body_key(self._settings.secret, marker))
            lines.append(b"content-length: " + str(len(body)).encode("ascii"))
        data = b"\r\n".join(lines) + b"\r\n\r\n" + body
        return await self._exchanges.request(member, data, head_request=method == "HEAD")

    def body(self, member: Member, response: PeerResponse) -> AsyncIterator[bytes]:
        """The response body; a broken exchange raises MemberUnavailable."""
        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.chunks():
                    yield chunk
            except TRANSPORT_ERRORS as exc:
                raise self.unavailable(member, exc) from exc
        return chunks()

    async def aclose(self) -> None:
        self._exchanges.close()
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()
