"""Kept-alive connections to a member for whole small peer calls: the answer is read
whole; a connection is reused; a kept-alive connection the member closed meanwhile is
replaced once; a member that breaks the exchange or cannot be reached is unavailable.
The member here is a real TCP server on 127.0.0.1 speaking raw HTTP/1.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from gateway.cluster.errors import MemberUnavailable
from gateway.cluster.exchange import ExchangePool
from gateway.cluster.settings import ClusterSettings
from gateway.cluster.view import Member

Start = Callable[["Peer"], Awaitable[Member]]
OK = b"HTTP/1.1 200 OK\r\nx-answer: yes\r\ncontent-length: 5\r\n\r\nhello"
REQUEST = b"PUT /_squall/peer/mirror HTTP/1.1\r\nhost: m\r\ncontent-length: 3\r\n\r\nabc"


class Peer:
    """A member that answers each request with what ``answer(n)`` gives (None: close
    the connection without answering); ``connections`` counts those accepted."""

    def __init__(self, answer: Callable[[int], bytes | None]) -> None:
        self.answer = answer
        self.connections = 0
        self.requests = 0
        self.writers: list[asyncio.StreamWriter] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                    ) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(3)  # every request here has a 3-byte body
                self.requests += 1
                data = self.answer(self.requests)
                if data is None:
                    break
                writer.write(data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def started() -> AsyncIterator[Start]:
    servers: list[asyncio.Server] = []

    async def start(peer: Peer) -> Member:
        server = await asyncio.start_server(peer.serve, "127.0.0.1", 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return Member(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}")

    yield start
    for server in servers:
        server.close()


def pool() -> ExchangePool:
    return ExchangePool(ClusterSettings(secret=b"s" * 32, connect_timeout_s=1.0))


async def test_the_whole_answer_is_read_and_the_connection_kept(started: Start) -> None:
    peer = Peer(lambda n: OK)
    member = await started(peer)
    exchanges = pool()
    try:
        for _ in range(3):
            answer = await exchanges.request(member, REQUEST)
            assert (answer.status, answer.header("X-Answer"), answer.body) == \
                (200, "yes", b"hello")
        assert (peer.connections, peer.requests) == (1, 3)
    finally:
        exchanges.close()


async def test_a_kept_connection_the_member_closed_is_replaced_once(started: Start) -> None:
    peer = Peer(lambda n: OK)
    member = await started(peer)
    exchanges = pool()
    try:
        await exchanges.request(member, REQUEST)
        peer.writers[0].transport.abort()  # the member drops the idle connection
        await asyncio.sleep(0.05)
        answer = await exchanges.request(member, REQUEST)
        assert answer.status == 200 and peer.connections == 2
    finally:
        exchanges.close()


async def test_a_member_that_breaks_a_new_exchange_is_unavailable(started: Start) -> None:
    peer = Peer(lambda n: None)  # reads the request, closes without an answer
    member = await started(peer)
    exchanges = pool()
    try:
        with pytest.raises(MemberUnavailable):
            await exchanges.request(member, REQUEST)
        assert peer.requests == 1  # not sent again: it may have been served
    finally:
        exchanges.close()


async def test_a_malformed_answer_makes_the_member_unavailable(started: Start) -> None:
    member = await started(Peer(lambda n: b"NOT HTTP AT ALL\r\n\r\n"))
    exchanges = pool()
    try:
        with pytest.raises(MemberUnavailable):
            await exchanges.request(member, REQUEST)
    finally:
        exchanges.close()


async def test_a_member_nobody_listens_for_is_unavailable() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    member = Member(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}")
    exchanges = pool()
    with pytest.raises(MemberUnavailable, match="refused"):
        await exchanges.request(member, REQUEST)
