"""Connection limits and timeouts of the HTTP server, enforced in the protocol before a
request reaches the application (and before authentication).

* header read timeout: the request line and headers must arrive within it (from the
  connection, or from the first byte of a later request on a kept-alive connection);
* body idle timeout: while a request body is due, the client must send some of it this
  often, else ``400 RequestTimeout`` as S3 answers (the application sees a disconnect, so
  nothing partial is stored);
* header size and count: ``400 RequestHeaderSectionTooLarge`` (S3's code) once the request
  line and headers exceed ``max_header_bytes`` or there are more than ``max_header_count``;
* connections: beyond ``max_connections`` a new connection is closed at once;
* requests: beyond ``max_requests`` in flight, ``503 SlowDown`` with ``Retry-After``.

Keep-alive is uvicorn's own ``timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httptools

from gateway.s3api.xml import document, el
from gateway.zerocopy import ZeroCopyHttpProtocol

#: S3's answers (code, status, message); messages as S3 words them
REQUEST_TIMEOUT = ("RequestTimeout", 400,
                   ("Your socket connection to the server was not read from or written to "
                    "within the timeout period. Idle connections will be closed."))
HEADERS_TOO_LARGE = ("RequestHeaderSectionTooLarge", 400,
                     "Your request header section exceeds the maximum allowed size.")
BAD_REQUEST = ("BadRequest", 400, "An error occurred when parsing the HTTP request.")
SLOW_DOWN = ("SlowDown", 503, "Please reduce your request rate.")
SLOW_DOWN_RETRY_AFTER_S = 1


@dataclass(frozen=True, slots=True)
class Limits:
    """The protocol's limits (seconds, bytes, counts); ``None`` disables one."""

    header_timeout_s: float | None = 30.0
    body_idle_timeout_s: float | None = 60.0
    max_header_bytes: int = 64 * 1024
    max_header_count: int = 300
    max_connections: int | None = 1024
    max_requests: int | None = 512
    #: called for each request refused with SlowDown (the ``slowdowns`` counter)
    on_slowdown: Callable[[], None] | None = None


class RequestPhase(enum.Enum):
    """Where a connection is in reading its current request."""

    HEADERS = 1  # waiting for (the rest of) a request line and headers
    BODY = 2  # headers complete, the request body not yet
    DONE = 3  # the request was read entirely


def error_bytes(error: tuple[str, int, str], *, close: bool,
                extra: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A whole HTTP/1.1 response carrying S3 error XML."""
    code, status, message = error
    body = document("Error", [el("Code", code), el("Message", message)], namespace=False)
    reason = "Bad Request" if status == 400 else "Service Unavailable"
    head = [f"HTTP/1.1 {status} {reason}", "content-type: application/xml",
            f"content-length: {len(body)}", "server: Squall",
            *(f"{name}: {value}" for name, value in extra)]
    if close:
        head.append("connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


class LimitedHttpProtocol(ZeroCopyHttpProtocol):
    """The gateway's httptools protocol with :class:`Limits` (``limits`` is set on a
    subclass made by :func:`protocol_class`)."""

    limits = Limits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit_concurrency = None  # requests are limited here, with an S3 answer
        self._phase = RequestPhase.HEADERS
        self._header_bytes = 0
        self._last_data = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._refused = False

    # -- connection ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limit = self.limits.max_connections
        if limit is not None and len(self.connections) > limit:
            transport.abort()  # one descriptor less at once; the client sees a reset
            return
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        """At the server's stop: an idle TLS connection with nothing left to send is
        aborted, since its close would wait for the client's close_notify (up to 30 s: an
        idle keep-alive client sends none) and hold the stop; the rest as uvicorn does."""
        idle = self.cycle is None or self.cycle.response_complete
        if idle and self.transport.get_extra_info("sslcontext") is not None \
                and not self.transport.get_write_buffer_size():
            self.transport.abort()
            return
        super().shutdown()

    def data_received(self, data: bytes) -> None:
        if self._phase is RequestPhase.BODY:  # the common case: one clock read per chunk
            self._last_data = self.loop.time()
            self._feed(data)
            return
        self._header_bytes += len(data)
        self._feed(data)
        # Timers only for what is still due after this chunk: a request that arrives
        # whole (most do) costs none.
        phase = self._phase
        if self.transport.is_closing():
            return
        if phase is RequestPhase.HEADERS:
            if self._header_bytes > self.limits.max_header_bytes:
                self._refuse(HEADERS_TOO_LARGE)
            elif self._timer is None:
                self._arm_header_timer()
        elif (phase is RequestPhase.BODY  # type: ignore[comparison-overlap]  # _feed moves it on
              and self._timer is None
              and self.limits.body_idle_timeout_s is not None):
            self._last_data = self.loop.time()
            self._timer = self.loop.call_later(self.limits.body_idle_timeout_s,
                                               self._body_idle)

    def _feed(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        try:
            self.feed(data)
        except httptools.HttpParserUpgrade:
            pass  # no upgrades (WebSocket) here: the request is served as plain HTTP
        except httptools.HttpParserError:
            if self._refused or self.transport.is_closing():
                return
            self.logger.warning("Invalid HTTP request received.")
            self._refuse(BAD_REQUEST)

    # -- parser callbacks ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._phase = RequestPhase.HEADERS

    def on_headers_complete(self) -> None:
        self._cancel_timer()
        limits = self.limits
        if ((self._header_bytes > limits.max_header_bytes
             and self._header_size() > limits.max_header_bytes)
                or len(self.headers) > limits.max_header_count):
            self._refuse(HEADERS_TOO_LARGE)
            raise _Refused()  # stops the parser: the request is not served
        self._phase = RequestPhase.BODY
        if limits.max_requests is not None and len(self.tasks) >= limits.max_requests:
            if limits.on_slowdown is not None:
                limits.on_slowdown()
            app, self.app = self.app, _slow_down
            try:
                super().on_headers_complete()
            finally:
                self.app = app
        else:
            super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._phase = RequestPhase.DONE
        self._header_bytes = 0
        self._cancel_timer()

    # -- timers --------------------------------------------------------------------------

    def _arm_header_timer(self) -> None:
        if self.limits.header_timeout_s is not None:
            self._timer = self.loop.call_later(self.limits.header_timeout_s,
                                               self._header_late)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _header_late(self) -> None:
        self._timer = None
        if self._phase is not RequestPhase.BODY and not self.transport.is_closing():
            if self._header_bytes:
                self._refuse(REQUEST_TIMEOUT)
            else:
                self.transport.close()  # nothing was asked: nothing to answer

    def _body_idle(self) -> None:
        self._timer = None
        if self._phase is not RequestPhase.BODY or self.transport.is_closing():
            return
        timeout = self.limits.body_idle_timeout_s
        assert timeout is not None
        idle = self.loop.time() - self._last_data
        if idle < timeout or self.flow.read_paused:
            # Data came meanwhile, or the application is not reading (not the client's
            # fault): look again later.
            self._timer = self.loop.call_later(max(timeout - idle, 0.1), self._body_idle)
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            cycle.disconnected = True  # the application sees a disconnect; its sends are dropped
            self._refuse(REQUEST_TIMEOUT)
        else:
            self.transport.close()

    # -- answers -------------------------------------------------------------------------

    def _refuse(self, error: tuple[str, int, str]) -> None:
        """Answer ``error`` and close the connection (the request is not served)."""
        self._refused = True
        self._cancel_timer()
        self.transport.write(error_bytes(error, close=True))
        self.transport.close()

    def _header_size(self) -> int:
        return len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)


class _Refused(Exception):
    """Stops the parser after a refusal answered from a callback."""


_SLOW_DOWN_BODY = error_bytes(SLOW_DOWN, close=False).partition(b"\r\n\r\n")[2]


async def _slow_down(scope: Any, receive: Any, send: Any) -> None:
    """The ASGI answer to a request beyond ``max_requests``."""
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", b"application/xml"),
        (b"content-length", str(len(_SLOW_DOWN_BODY)).encode()),
        (b"retry-after", str(SLOW_DOWN_RETRY_AFTER_S).encode()),
        (b"server", b"Squall")]})
    await send({"type": "http.response.body", "body": _SLOW_DOWN_BODY})


def protocol_class(limits: Limits) -> type[LimitedHttpProtocol]:
    """The protocol class uvicorn builds for each connection, with ``limits``."""
    return type("LimitedHttpProtocol", (LimitedHttpProtocol,), {"limits": limits})
