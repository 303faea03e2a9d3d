"""Connection hand-over between workers: a request for another worker's key moves the
client's connection to that worker instead of being proxied to it.

When the head of a request (request line and headers) has been parsed, before the
application runs and before the body is read, the receiving worker looks up the key's
owner. If another worker owns it, the connection's socket goes to the owner over a Unix
``SOCK_SEQPACKET`` socket (``SCM_RIGHTS``), in one message with the bytes of this request
already read (every byte since the last request boundary). The owner adopts the socket
(``loop.connect_accepted_socket``), feeds those bytes to its protocol before anything
else is read, and serves this request and the next ones on the connection; a later request
for a third worker's key moves it on again. The sender closes only its descriptor: the
one in flight or in the owner keeps the TCP connection open (no FIN, no RST).

A message is atomic (``SOCK_SEQPACKET``): either the owner gets the socket and all its
bytes, or the send fails and the request is served here, proxied as before. Proxying
stays the path for TLS (its state cannot move), a request that did not start at the
beginning of a read (pipelining), a connection with a response still being written,
bucket-level and admin requests, a head larger than one message, and any failed send
(the owner is down or its queue is full).

Wire format of one message: ``b"SQH1"`` then the request's raw bytes; ancillary data: one
descriptor (SCM_RIGHTS).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import errno
import logging
import os
import socket
import stat
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httptools
import uvicorn

from gateway.cluster.peerauth import HEADER_BYTES
from gateway.cluster.view import Membership
from gateway.http.limits import LimitedHttpProtocol, Limits, RequestPhase, slot_table
from gateway.http.slots import Slot
from gateway.http.workers.host import HostWorkers
from gateway.protocol.targets import object_target

log = logging.getLogger("squall.workers")

MAGIC = b"SQH1"
#: Unix SOCK_SEQPACKET with SCM_RIGHTS, and libuv dropping a closed descriptor from its
#: epoll set (the connection stays open in another process): Linux
SUPPORTED = sys.platform == "linux" and hasattr(socket, "SOCK_SEQPACKET")
ADMIN_PREFIX = b"/_squall/"
#: the hand-over channel's send buffer (the kernel doubles it, within net.core.wmem_max);
#: one message holds at most this less the kernel's overhead
SEND_BUFFER = 1 << 20
_KERNEL_OVERHEAD = 32  # unix_dgram_sendmsg: EMSGSIZE beyond sk_sndbuf - 32
RETRY_CONNECT_S = 0.5  # an owner whose socket refused: proxy until then
_FDS_SPACE = socket.CMSG_SPACE(4 * array.array("i").itemsize)  # room for a few fds


def handover_path(peer_socket: Path | str) -> Path:
    """Worker k's hand-over socket, beside its peer socket ``worker-<k>.sock``
    (a shorter name, so it fits wherever the peer socket fits)."""
    path = Path(peer_socket)
    return path.with_name(path.name.replace("worker-", "hand-", 1))


class KeyOwners:
    """The worker of this host a request is for, as the cluster layer computes it."""

    def __init__(self, membership: Membership, domain: str | None, host: HostWorkers) -> None:
        self._membership = membership
        self._domain = domain.lower() if domain else None
        self._host = host

    def other_owner(self, url: bytes, host: bytes, marker: bytes | None = None
                    ) -> int | None:
        """The worker of this host a request is for when it is another one: the member
        a peer request (``marker``) is signed for, else the owner of an object-level
        request's key. None for this worker, a member on another host, and bucket-level,
        service-level and admin requests without a marker."""
        view = self._membership.view
        if marker is not None:
            worker = self._host.addressed(marker)
        else:
            try:
                path = httptools.parse_url(url).path
            except httptools.HttpParserInvalidURLError:
                return None
            if path.startswith(ADMIN_PREFIX):
                return None
            target = object_target(path, host.decode("latin-1"), self._domain)
            if target is None:
                return None
            worker = self._host.worker(view.owner(*target))
        return None if worker == self._host.worker(view.me) else worker


@dataclass(slots=True)
class HandoverStats:
    """Connections this worker handed to others, could not hand (proxied instead),
    and adopted from others (``"handover"`` in the worker's status)."""

    sent: int = 0
    failed: int = 0
    adopted: int = 0


class HandoverSender:
    """This worker's channels to the others' hand-over sockets, connected on first use."""

    def __init__(self, paths: Mapping[int, Path], stats: HandoverStats) -> None:
        self._paths = dict(paths)
        self._channels: dict[int, tuple[socket.socket, int]] = {}  # owner -> (sock, max)
        self._retry_at: dict[int, float] = {}
        self.stats = stats

    def send(self, owner: int, fd: int, chunks: Sequence[bytes]) -> bool:
        """Queue the connection ``fd`` with its bytes ``chunks`` at ``owner``: True once
        the owner's socket holds them (the caller then closes its descriptor), False if
        they were not sent (the caller serves the request)."""
        size = len(MAGIC) + sum(len(c) for c in chunks)
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", (fd,)))]
        for _ in range(2):  # a channel to an owner that restarted fails once: reconnect
            channel = self._channels.get(owner) or self._connect(owner)
            if channel is None:
                break
            sock, largest = channel
            if size > largest:
                break
            try:
                sock.sendmsg([MAGIC, *chunks], ancillary, socket.MSG_NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                break  # the owner's queue is full: proxy this one
            except OSError as exc:
                if exc.errno == errno.EMSGSIZE:  # larger than this channel takes
                    break
                self._drop(owner)  # the owner is gone (restarted, stopped)
                continue
            self.stats.sent += 1
            return True
        self.stats.failed += 1
        return False

    def _connect(self, owner: int) -> tuple[socket.socket, int] | None:
        if time.monotonic() < self._retry_at.get(owner, 0.0):
            return None
        path = self._paths.get(owner)
        if path is None:
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
            sock.setblocking(False)
            sock.connect(str(path))
        except OSError:  # not listening (down, starting) or its backlog is full
            sock.close()
            self._retry_at[owner] = time.monotonic() + RETRY_CONNECT_S
            return None
        largest = sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) - _KERNEL_OVERHEAD
        self._channels[owner] = channel = (sock, largest)
        return channel

    def _drop(self, owner: int) -> None:
        channel = self._channels.pop(owner, None)
        if channel is not None:
            channel[0].close()

    def close(self) -> None:
        for owner in list(self._channels):
            self._drop(owner)


Adopt = Callable[[socket.socket, bytes], None]


class HandoverReceiver:
    """This worker's hand-over socket: adopts the connections other workers send."""

    def __init__(self, path: Path, adopt: Adopt, stats: HandoverStats) -> None:
        self.path = path
        self._adopt = adopt
        self.stats = stats
        self._listener: socket.socket | None = None
        self._channels: set[socket.socket] = set()
        self._buffer = bytearray(2 * SEND_BUFFER + 4096)  # the largest message possible
        self._view = memoryview(self._buffer)
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Listen (on the running loop); a stale socket file from a crash is replaced."""
        self._loop = asyncio.get_running_loop()
        try:
            if stat.S_ISSOCK(self.path.lstat().st_mode):
                self.path.unlink()
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            listener.bind(str(self.path))
            os.chmod(self.path, 0o600)
            listener.listen(64)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._loop.add_reader(listener.fileno(), self._accept)

    def _accept(self) -> None:
        assert self._listener is not None and self._loop is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("hand-over socket: accept failed: %s", exc)
                return
            conn.setblocking(False)
            self._channels.add(conn)
            self._loop.add_reader(conn.fileno(), self._receive, conn)

    def _receive(self, conn: socket.socket) -> None:
        while True:
            try:
                size, ancillary, flags, _ = conn.recvmsg_into([self._view], _FDS_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._close_channel(conn)
                return
            fds = _descriptors(ancillary)
            if size == 0 and not fds:  # the sender closed its channel
                self._close_channel(conn)
                return
            if (len(fds) != 1 or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC)
                    or self._view[:len(MAGIC)] != MAGIC):
                log.warning("hand-over socket: dropped a malformed message")
                for fd in fds:
                    os.close(fd)
                continue
            try:
                sock = socket.socket(fileno=fds[0])
            except OSError:
                os.close(fds[0])
                continue
            if sock.type != socket.SOCK_STREAM or sock.family not in (socket.AF_INET,
                                                                      socket.AF_INET6):
                sock.close()
                continue
            self.stats.adopted += 1
            self._adopt(sock, bytes(self._view[len(MAGIC):size]))

    def _close_channel(self, conn: socket.socket) -> None:
        if conn in self._channels:
            self._channels.discard(conn)
            if self._loop is not None:
                self._loop.remove_reader(conn.fileno())
            conn.close()

    def close(self) -> None:
        """Stop listening and drop the channels (once every worker has drained)."""
        if self._listener is not None and self._loop is not None:
            self._loop.remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        for conn in list(self._channels):
            self._close_channel(conn)


def _descriptors(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return list(fds)


class _HandedOver(Exception):
    """Stops the parser: the connection went to another worker."""


class HandoverHttpProtocol(LimitedHttpProtocol):
    """The gateway's protocol that hands a connection to the owner of its request's key
    (``owners`` and ``sender`` are set on a subclass made by :func:`protocol_class`).
    ``handed``, set before ``connection_made``, holds bytes another worker read from this
    connection: they are parsed before anything the socket delivers."""

    owners: KeyOwners
    sender: HandoverSender

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handed: bytes | None = None
        # The reads since the current request began, when it began at a read's start;
        # None when not known (it began inside a read that carried an earlier request).
        self._since: list[bytes] | None = None
        self._begun = 0  # requests begun in those reads

    def adopted(self) -> bool:
        return self.handed is not None  # its slot was given where it arrived

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        handed, self.handed = self.handed, None
        if handed and not transport.is_closing():
            self.data_received(handed)

    def data_received(self, data: bytes) -> None:
        if self._phase is RequestPhase.BODY:
            self._since = None
        elif not self._header_bytes:  # at a request boundary
            self._since = [data]
            self._begun = 0
        elif self._since is not None:  # the rest of a head
            self._since.append(data)
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._begun += 1

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._since = None  # an idle connection keeps no read alive

    def on_headers_complete(self) -> None:
        since = self._since
        # (a connection in a probe slot is never handed: it may only ask for health or
        # metrics, which the base class checks)
        if (since is not None and self._begun == 1 and self._slot is Slot.REGULAR
                and self._idle()):
            host = next((v for n, v in self.headers if n == b"host"), b"")
            marker = next((v for n, v in self.headers if n == HEADER_BYTES), None)
            owner = self.owners.other_owner(self.url, host, marker)
            if owner is not None and self._hand_over(owner, since):
                raise _HandedOver()  # stops the parser (the rest went with the socket)
        super().on_headers_complete()

    def _idle(self) -> bool:
        """Nothing of an earlier request is still being answered on this connection."""
        cycle = self.cycle
        return ((cycle is None or cycle.response_complete) and not self.pipeline
                and not self.transport.get_write_buffer_size())

    def _hand_over(self, owner: int, chunks: list[bytes]) -> bool:
        sock = self.transport.get_extra_info("socket")
        if sock is None or not self.sender.send(owner, sock.fileno(), chunks):
            return False
        self._since = None
        self._refused = True  # the parser's error after _HandedOver is not the client's
        self._cancel_timer()
        # Only this process's descriptor closes: the owner's keeps the connection.
        self.transport.close()
        return True


def protocol_class(limits: Limits, owners: KeyOwners,
                   sender: HandoverSender) -> type[HandoverHttpProtocol]:
    """The protocol class of a worker's public port with hand-over."""
    return type("HandoverHttpProtocol", (HandoverHttpProtocol,),
                {"limits": limits, "slots": slot_table(limits), "owners": owners,
                 "sender": sender})


def adopter(server: uvicorn.Server) -> Adopt:
    """Adopts a handed connection into ``server`` (its protocol, connections and
    tasks), as if the client had connected to it. A server that is stopping serves the
    handed request, then closes the connection."""

    def factory() -> asyncio.Protocol:
        config = server.config
        protocol: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
            config=config, server_state=server.server_state,
            app_state=server.lifespan.state)
        return protocol

    async def adopt(sock: socket.socket, data: bytes) -> None:
        loop = asyncio.get_running_loop()

        def handed() -> asyncio.Protocol:
            protocol = factory()
            if isinstance(protocol, HandoverHttpProtocol):
                protocol.handed = data
            return protocol
        try:
            _, protocol = await loop.connect_accepted_socket(handed, sock)
        except OSError as exc:  # the client went away meanwhile
            log.debug("a handed connection could not be adopted: %s", exc)
            sock.close()
            return
        if server.should_exit and isinstance(protocol, HandoverHttpProtocol):
            protocol.shutdown()

    tasks: set[asyncio.Task[None]] = set()

    def start(sock: socket.socket, data: bytes) -> None:
        task = asyncio.get_running_loop().create_task(adopt(sock, data))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    return start


async def finish(server: uvicorn.Server, grace_s: float) -> None:
    """Finish the requests of connections adopted after ``server`` stopped (a drained
    worker still adopts what others hand it until every worker has drained), within
    ``grace_s``; their connections close."""
    state = server.server_state
    for connection in list(state.connections):
        connection.shutdown()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(grace_s):
            while state.tasks:
                await asyncio.wait(set(state.tasks))
