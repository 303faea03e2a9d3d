"""Connections to the other members: keep-alive pools, streaming both ways.

aiohttp's client (already installed with aiobotocore): its C parser keeps a forwarded
request cheap, and with ``encoded=True`` URLs it sends the request target byte for byte
(httpx re-quotes paths and drops ``.``/``..`` segments, which are legal in S3 keys and
covered by the client's signature). Automatic headers are switched off: the owner must
see the client's headers, and only those (plus the peer marker). The workers of one host
(``--workers N``) reach each other through Unix sockets (:meth:`use_unix_sockets`); the
workers of other hosts are reached at their host's URL (the peer marker names the
worker).
``https://`` members are verified against the system's CAs and ``--peer-ca``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence

import aiohttp
from yarl import URL

from gateway.cluster.bodyseal import TAG_BYTES, body_key, seal
from gateway.cluster.errors import MemberUnavailable
from gateway.cluster.peerauth import HEADER, PeerAuth
from gateway.cluster.settings import ClusterSettings
from gateway.tls import client_context

TRANSPORT_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)
# Errors after which a request without a body is sent once more on a new connection
# (a keep-alive connection the peer closed as the request went out).
_STALE = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)
_NO_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")
#: Largest response header a member accepts from a peer (aiohttp's default is 8190). An
#: object's info travels in one header as ASCII JSON: S3 bounds what it holds (2 KB of
#: user metadata, 8 KB of request headers, 10 tags), and escaping at most triples it.
PEER_MAX_FIELD_BYTES = 64 * 1024


def _describe(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError | ConnectionRefusedError):
        return "connection refused or unreachable"
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


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
    """Sends signed requests to members by node id; errors become MemberUnavailable."""

    def __init__(self, settings: ClusterSettings, auth: PeerAuth) -> None:
        self._settings = settings
        self._auth = auth
        ring = settings.ring
        self._bases = {i: ring.url_of(i) for i in range(len(ring.members))
                       if i != ring.self_index}
        # Workers of other hosts (--peers with --workers N) get a pool each: a connection
        # is handed to the worker it is signed for, and stays with it.
        self._per_member = ring.workers > 1
        self._names = dict(enumerate(ring.members))
        self._hosts = {i: url.split("://", 1)[1] for i, url in self._bases.items()}
        self._unix: dict[int, str] = {}
        # One session for TCP members; one per member reached through a Unix socket
        # (aiohttp's UnixConnector has one path). Made on the event loop, at first use.
        self._sessions: dict[int | None, aiohttp.ClientSession] = {}
        self._timeout = aiohttp.ClientTimeout(total=None,
                                              sock_connect=settings.connect_timeout_s,
                                              sock_read=settings.read_timeout_s)

    def use_unix_sockets(self, paths: Mapping[int, str]) -> None:
        """Reach these members through their Unix socket paths instead of their URLs
        (the workers of one host, docs/workers.md); the URLs stay their names in the
        ring, in the peer marker and in ``Host``. Call before the first request."""
        if self._sessions:
            raise RuntimeError("use_unix_sockets() after the first request")
        self._unix = {node: path for node, path in paths.items() if node in self._bases}

    @property
    def local_workers(self) -> bool:
        """Whether the members are the workers of one host (Unix sockets)."""
        return bool(self._unix)

    def _client(self, node: int) -> aiohttp.ClientSession:
        path = self._unix.get(node)
        slot = node if path is not None or self._per_member else None
        session = self._sessions.get(slot)
        if session is None:
            connector: aiohttp.BaseConnector
            if path is not None:
                connector = aiohttp.UnixConnector(
                    path=path, limit=self._settings.connections_per_peer,
                    keepalive_timeout=30.0)
            else:
                tls = any(url.startswith("https://") for url in self._bases.values())
                connector = aiohttp.TCPConnector(
                    limit=0, limit_per_host=self._settings.connections_per_peer,
                    keepalive_timeout=30.0, ttl_dns_cache=10,
                    ssl=client_context(self._settings.peer_ca) if tls else True)
            session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, timeout=self._timeout,
                skip_auto_headers=_NO_AUTO_HEADERS, max_field_size=PEER_MAX_FIELD_BYTES)
            self._sessions[slot] = session
        return session

    def unavailable(self, node: int, exc: BaseException) -> MemberUnavailable:
        return MemberUnavailable(node, self._names.get(node, "?"), _describe(exc))

    def set_members(self, members: Sequence[str], self_index: int) -> None:
        """The member list changed (live membership): node ids name these URLs now.
        Pooled connections are kept (they are per host, not per node id)."""
        self._bases = {i: url for i, url in enumerate(members) if i != self_index}
        self._names = dict(enumerate(members))
        self._hosts = {i: url.split("://", 1)[1] for i, url in self._bases.items()}

    async def open(self, node: int, method: str, path: bytes, query: bytes = b"", *,
                   headers: Sequence[tuple[bytes, bytes]] = (),
                   content: AsyncIterable[bytes] | None = None,
                   timeout: float | None = None,  # noqa: ASYNC109  aiohttp socket timeouts
                   wait_continue: bool = True, ring_id: str | None = None) -> PeerResponse:
        """Send a request signed for ``node`` (a body without a content-length goes
        chunked); the caller closes the streamed response.

        A body is sent with its integrity tag (:mod:`gateway.cluster.bodyseal`), after
        the member's ``100 Continue`` unless ``wait_continue`` is false (a call the
        member does not refuse before reading its body saves a round trip).
        MemberUnavailable if the member cannot be reached or the exchange breaks; other
        exceptions (from ``content``) propagate unchanged.
        """
        target = path.decode("latin-1")
        if query:
            target += "?" + query.decode("latin-1")
        url = URL(self._bases[node] + target, encoded=True)
        marker = self._auth.sign(method, path, query, node, ring_id)
        sent = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers]
        if content is not None:  # the body ends with its tag (bodyseal)
            content = seal(content, body_key(self._settings.secret, marker))
            sent = [(n, str(int(v) + TAG_BYTES) if n.lower() == "content-length" else v)
                    for n, v in sent]
        sent.append((HEADER, marker))
        if not any(n == b"host" for n, _ in headers):
            sent.append(("host", self._hosts[node]))
        request_timeout = self._timeout if timeout is None else aiohttp.ClientTimeout(
            total=None, sock_connect=min(timeout, self._settings.connect_timeout_s),
            sock_read=timeout)
        attempts = 1 if content is not None else 2
        for attempt in range(attempts):
            try:
                # A body waits for "100 Continue": a member that refuses the request
                # first (a bad signature, no such bucket) answers before any of it is
                # sent, and the answer is not lost to a reset connection.
                response = await self._client(node).request(
                    method, url, headers=sent, data=content, allow_redirects=False,
                    timeout=request_timeout, compress=None,
                    expect100=content is not None and wait_continue)
                return PeerResponse(response)
            except TRANSPORT_ERRORS as exc:
                if isinstance(exc, _STALE) and attempt + 1 < attempts:
                    continue
                raise self.unavailable(node, exc) from exc
        raise AssertionError("unreachable")

    def body(self, node: int, response: PeerResponse) -> AsyncIterator[bytes]:
        """The response body; a broken exchange raises MemberUnavailable."""
        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.chunks():
                    yield chunk
            except TRANSPORT_ERRORS as exc:
                raise self.unavailable(node, exc) from exc
        return chunks()

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()
