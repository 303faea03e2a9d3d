"""Zero-copy response bodies: uvicorn's httptools protocol with the ASGI
``http.response.zerocopysend`` extension, served by sendfile(2).

An application that finds ``"http.response.zerocopysend"`` in ``scope["extensions"]``
may send ``{"type": "http.response.zerocopysend", "file": f, "offset": o, "count": n,
"more_body": bool}`` after ``http.response.start`` (fixed Content-Length, no TLS): the
kernel then moves the file's bytes to the socket without copying them through Python.
``f`` needs ``fileno()``; it may carry ``run``, the thread pool of its device
(:class:`backends.regions.FileRegion`).

The send runs in a worker thread (a file whose pages are not cached makes sendfile wait
for the device, never the event loop), sending while the client keeps taking the bytes
(a full socket buffer is waited for in the thread for up to ``SPIN_MS``); after that the
event loop waits for the socket to take more, through a duplicate of its fd (uvloop
watches the original for the transport).
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
from collections.abc import Awaitable, Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from backends.blocking import run_blocking

EXTENSION = "http.response.zerocopysend"
#: how long a send thread waits for room in a full socket buffer before it hands the
#: socket back to the event loop
SPIN_MS = 20
#: errors that mean the client went away
_GONE = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ESHUTDOWN)


class ZeroCopyHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose requests may answer with sendfile."""

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.scheme == "http":  # sendfile bypasses TLS: only for plain connections
            self.scope["extensions"] = {EXTENSION: {}}

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if type(self.cycle) is RequestResponseCycle:
            self.cycle.__class__ = ZeroCopyCycle


class ZeroCopyCycle(RequestResponseCycle):
    """A request/response cycle that also takes ``http.response.zerocopysend``."""

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
                            getattr(file, "run", run_blocking))
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
                    run: Callable[..., Awaitable[Any]]) -> None:
    """Send ``count`` bytes of ``file_fd`` from ``offset`` on ``transport``'s socket,
    after what the transport has buffered."""
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
        while count > 0:
            sent, blocked = await run(_send_some, sock_fd, file_fd, offset, count)
            offset += sent
            count -= sent
            if blocked:
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
