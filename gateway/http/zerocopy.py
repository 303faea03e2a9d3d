"""Bodies with fewer copies: uvicorn's httptools protocol with the ASGI
``http.response.zerocopysend`` extension, served by sendfile(2), and request bodies handed
to the application as the socket's reads.

An application that finds ``"http.response.zerocopysend"`` in ``scope["extensions"]``
may send ``{"type": "http.response.zerocopysend", "file": f, "offset": o, "count": n,
"more_body": bool}`` after ``http.response.start`` (fixed Content-Length, no TLS): the
kernel then moves the file's bytes to the socket without copying them through Python.
``f`` needs ``fileno()``; it may carry ``run``, the thread pool of its device
(:class:`backends.core.regions.FileRegion`).

The send runs in a worker thread (a file whose pages are not cached makes sendfile wait
for the device, never the event loop), sending while the client keeps taking the bytes
(a full socket buffer is waited for in the thread for up to ``SPIN_MS``); after that the
event loop waits for the socket to take more, through a duplicate of its fd (uvloop
watches the original for the transport).

A request body of a stated length goes past httptools once the head is parsed (the parser
would copy every byte into a new object) and past uvicorn's body buffer (two more
copies): each read inside the body is one ``http.request`` message as it came from the
socket. Chunked bodies still go through the parser.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import select
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import httptools
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from backends.core.blocking import run_blocking

EXTENSION = "http.response.zerocopysend"
#: how long a send thread waits for room in a full socket buffer before it hands the
#: socket back to the event loop
SPIN_MS = 20
#: errors that mean the client went away
_GONE = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ESHUTDOWN)


class ZeroCopyHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose requests may answer with sendfile, and whose
    request bodies of a known length reach the application as the socket's reads, past
    the parser (see :meth:`feed`)."""

    _body_left = 0  # bytes of the current body (a Content-Length) not delivered yet

    # What sendfile tells of a client that takes the response (a subclass meters it).
    def write_blocked(self) -> None:
        """The socket is full: the send waits for the client."""

    def write_unblocked(self, taken: int) -> None:
        """The wait is over; the client took ``taken`` bytes."""

    def wrote(self, taken: int) -> None:
        """The client took ``taken`` bytes without a wait."""

    def feed(self, data: bytes) -> None:
        """Parse ``data``; a read inside a body of a known length goes to the application
        without the parser, which would copy it (its end replaces the parser with a new
        one, as the old one still counts the body, and completes the request)."""
        left = self._body_left
        if left:
            taken = data if len(data) <= left else data[:left]
            self.on_body(taken)
            if self._body_left:
                return
            data = data[len(taken):]
            self.parser = _new_parser(self)
            self.on_message_complete()
            if not data:
                return
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._body_left = 0
        if self.scheme == "http":  # sendfile bypasses TLS: only for plain connections
            self.scope["extensions"] = {EXTENSION: {}}

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        if type(cycle) is RequestResponseCycle:
            cycle.__class__ = ZeroCopyCycle
            assert isinstance(cycle, ZeroCopyCycle)
            cycle.pieces, cycle.held = deque(), 0
            cycle.meter = self
            self._body_left = _content_length(self.headers)

    def on_body(self, body: bytes) -> None:
        if self._body_left:  # a stated length (a chunked body's is not known)
            self._body_left -= len(body)
        cycle = self.cycle
        if type(cycle) is not ZeroCopyCycle:
            return super().on_body(body)
        if (self.parser.should_upgrade() and self._should_upgrade()) or cycle.response_complete:
            return
        cycle.pieces.append(body)
        cycle.held += len(body)
        if cycle.held > HIGH_WATER_LIMIT:
            self.flow.pause_reading()
        cycle.message_event.set()


def _new_parser(protocol: HttpToolsProtocol) -> httptools.HttpRequestParser:
    """A parser as uvicorn makes one for a connection."""
    parser = httptools.HttpRequestParser(protocol)
    with contextlib.suppress(AttributeError):  # httptools < 0.6.3
        parser.set_dangerous_leniencies(lenient_data_after_close=True)
    return parser


def _content_length(headers: list[tuple[bytes, bytes]]) -> int:
    """The body's length when the request states it plainly (one Content-Length, no
    Transfer-Encoding); else 0 (the parser then reads the body)."""
    lengths = [value for name, value in headers if name == b"content-length"]
    if len(lengths) != 1 or not lengths[0].isdigit() \
            or any(name == b"transfer-encoding" for name, _ in headers):
        return 0
    return int(lengths[0])


class ZeroCopyCycle(RequestResponseCycle):
    """A request/response cycle that also takes ``http.response.zerocopysend``, and
    hands the request body to the application in the pieces the parser gave, without
    joining them (uvicorn copies every byte twice more: into a buffer, then out of it)."""

    pieces: deque[bytes]  # body pieces not received yet, ``held`` bytes
    held: int
    meter: ZeroCopyHttpProtocol  # told when sendfile waits for the client

    async def receive(self) -> Any:
        if self.waiting_for_100_continue and not self.transport.is_closing():
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.waiting_for_100_continue = False
        if not self.pieces and not self.disconnected and not self.response_complete:
            self.flow.resume_reading()
            await self.message_event.wait()
            self.message_event.clear()
        if self.disconnected or self.response_complete:
            return {"type": "http.disconnect"}
        body = b""
        if self.pieces:
            body = self.pieces.popleft()
            self.held -= len(body)
            if not self.pieces:
                self.message_event.clear()
        return {"type": "http.request", "body": body,
                "more_body": self.more_body or bool(self.pieces)}

    async def send(self, message: Any) -> None:
        if message["type"] != EXTENSION:
            return await super().send(message)
        if (not self.response_started or self.response_complete or self.chunked_encoding
                or self.scope["method"] == "HEAD"):
            raise RuntimeError(f"Unexpected ASGI message '{EXTENSION}' here.")
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected:
            return
        file = message["file"]
        offset = message.get("offset") or 0
        count = message.get("count")
        if count is None:
            count = os.fstat(file.fileno()).st_size - offset
        if count > self.expected_content_length:
            raise RuntimeError("Response content longer than Content-Length")
        try:
            await send_file(self.transport, file.fileno(), offset, count,
                            getattr(file, "run", run_blocking), self.meter)
        except OSError as exc:
            if exc.errno not in _GONE:
                raise
            self.disconnected = True
            self.transport.close()
            return
        self.expected_content_length -= count
        await super().send({"type": "http.response.body", "body": b"",
                            "more_body": message.get("more_body", False)})


async def send_file(transport: asyncio.Transport, file_fd: int, offset: int, count: int,
                    run: Callable[..., Awaitable[Any]],
                    meter: ZeroCopyHttpProtocol | None = None) -> None:
    """Send ``count`` bytes of ``file_fd`` from ``offset`` on ``transport``'s socket,
    after what the transport has buffered; ``meter`` is told when the send waits for the
    client and what it took."""
    while transport.get_write_buffer_size():  # the response head, rarely still queued
        if transport.is_closing():
            raise ConnectionResetError(errno.ECONNRESET, "connection closed")
        await asyncio.sleep(0.001)
    if transport.is_closing():
        raise ConnectionResetError(errno.ECONNRESET, "connection closed")
    # Our own fd of the socket: the transport's may be closed (and its number reused by
    # the next connection) while a send is still running.
    sock_fd = os.dup(transport.get_extra_info("socket").fileno())
    try:
        waited = False
        while count > 0:
            sent, blocked = await run(_send_some, sock_fd, file_fd, offset, count)
            offset += sent
            count -= sent
            if meter is not None:
                if waited:
                    meter.write_unblocked(sent)
                else:
                    meter.wrote(sent)
            waited = blocked
            if blocked:
                if meter is not None:
                    meter.write_blocked()
                await _writable(sock_fd, transport)
    finally:
        os.close(sock_fd)


def _send_some(sock_fd: int, file_fd: int, offset: int, count: int) -> tuple[int, bool]:
    """sendfile until done, or until the socket's buffer stayed full for ``SPIN_MS``:
    (bytes sent, blocked). A client that reads as fast as the file is sent keeps the send
    in this thread, without a round trip through the event loop (and a gap on the wire)
    each time the buffer fills; a slower one gives the thread back."""
    sent = 0
    poller: select.poll | None = None
    while sent < count:
        try:
            n = os.sendfile(sock_fd, file_fd, offset + sent, count - sent)
        except BlockingIOError:
            if poller is None:
                poller = select.poll()
                poller.register(sock_fd, select.POLLOUT)
            if not poller.poll(SPIN_MS):
                return sent, True
            continue
        if n == 0:
            raise OSError(errno.EIO, "the file ended before the response did")
        sent += n
    return sent, False


async def _writable(fd: int, transport: asyncio.Transport) -> None:
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)
    loop.add_writer(fd, wake)
    try:
        while not ready.done():
            if transport.is_closing():
                raise ConnectionResetError(errno.ECONNRESET, "connection closed")
            await asyncio.wait([ready], timeout=1.0)
    finally:
        loop.remove_writer(fd)
