"""Connection limits and timeouts of the HTTP server, enforced in the protocol before a
request reaches the application (and before authentication).

* header read timeout: the request line and headers must arrive within it (from the
  connection, or from the first byte of a later request on a kept-alive connection);
  while connection slots are busy (:mod:`gateway.http.slots`), within the much shorter
  ``busy_header_timeout_s``, which also shortens the wait of connections already waiting;
* body idle timeout: while a request body is due, the client must send some of it this
  often, else ``400 RequestTimeout`` as S3 answers (the application sees a disconnect, so
  nothing partial is stored);
* body pace (:mod:`gateway.http.pace`): after a grace period a body must keep a minimum rate,
  and arrive whole within a deadline scaled by its declared length, else the same
  ``400 RequestTimeout``; a response whose writes wait on a client that takes it more
  slowly than the minimum rate is cut (the connection is aborted);
* header size and count: ``400 RequestHeaderSectionTooLarge`` (S3's code) once the request
  line and headers exceed ``max_header_bytes`` or there are more than ``max_header_count``;
* connections (:mod:`gateway.http.slots`): beyond ``max_connections_per_client`` of one
  client address a new connection is closed at once; beyond ``max_connections`` one from
  an address that holds none may ask for health or metrics once (a few probe slots),
  anything else is closed at once;
* requests: beyond ``max_requests`` in flight, ``503 SlowDown`` with ``Retry-After``;
  ``/_squall/health`` is never refused, and the other admin routes (not the peer
  protocol) have ``admin_reserve`` requests of their own beyond the limit, so that S3
  traffic never makes the admin surface wait.

Keep-alive is uvicorn's own ``timeout_keep_alive``.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.flow_control import FlowControl

from backends.core.errors import SlowDown
from gateway.http.answers import closing_answer, error_answer
from gateway.http.pace import BodyPace, PaceLimits, StallMeter, Verdict
from gateway.http.relaying import RelayingHttpProtocol, Router
from gateway.http.slots import ClientSlots, Slot, SlotLimits, client_key
from gateway.protocol.errors import (
    BadRequest,
    RequestHeaderSectionTooLarge,
    RequestTimeout,
)

#: request targets that are never refused for ``max_requests`` (liveness probes)
HEALTH_PATH = b"/_squall/health"
#: what a connection in a probe slot may ask for
PROBE_PATHS = frozenset({HEALTH_PATH, b"/_squall/metrics"})
ADMIN_PREFIX = b"/_squall/"
PEER_PREFIX = b"/_squall/peer/"  # members' S3 traffic: limited as S3 requests are


@dataclass(frozen=True, slots=True)
class Limits:
    """The protocol's limits (seconds, bytes, counts); ``None`` disables one. Built from
    the settings (:func:`gateway.http.server.limits_of`), whose limits section holds the
    defaults."""

    header_timeout_s: float | None
    body_idle_timeout_s: float | None
    max_header_bytes: int
    max_header_count: int
    max_connections: int | None
    max_requests: int | None
    #: minimum rates and the body deadline (:mod:`gateway.http.pace`)
    pace: PaceLimits
    #: connections of one client address (:mod:`gateway.http.slots`)
    max_connections_per_client: int | None = None
    #: the header timeout while slots are busy, and of probe slots
    busy_header_timeout_s: float | None = None
    #: admin requests admitted beyond ``max_requests`` (health checks: always)
    admin_reserve: int = 64
    #: called for each request refused with SlowDown (the ``slowdowns`` counter)
    on_slowdown: Callable[[], None] | None = None
    #: called for each connection refused (the ``connections_refused`` counter)
    on_refused: Callable[[], None] | None = None


class MeteredFlow(FlowControl):
    """uvicorn's flow control that also keeps how long reading was paused (the server
    did not read: that time is never the client's)."""

    def __init__(self, transport: asyncio.Transport, clock: Callable[[], float]) -> None:
        super().__init__(transport)
        self._clock = clock
        self._paused_at = 0.0
        self._paused_total = 0.0

    def pause_reading(self) -> None:
        if not self.read_paused:
            self._paused_at = self._clock()
        super().pause_reading()

    def resume_reading(self) -> None:
        if self.read_paused:
            self._paused_total += self._clock() - self._paused_at
        super().resume_reading()

    def paused_s(self, now: float) -> float:
        """Seconds reading was paused since the connection was made, up to ``now``."""
        if self.read_paused:
            return self._paused_total + now - self._paused_at
        return self._paused_total


class RequestPhase(enum.Enum):
    """Where a connection is in reading its current request."""

    HEADERS = 1  # waiting for (the rest of) a request line and headers
    BODY = 2  # headers complete, the request body not yet
    DONE = 3  # the request was read entirely


#: S3's answers to requests refused here (the messages as S3 words them)
REQUEST_TIMEOUT = closing_answer(RequestTimeout())
HEADERS_TOO_LARGE = closing_answer(RequestHeaderSectionTooLarge())
BAD_REQUEST = closing_answer(BadRequest("An error occurred when parsing the HTTP request."))
NOT_A_PROBE = closing_answer(SlowDown())


class LimitedHttpProtocol(RelayingHttpProtocol):
    """The gateway's httptools protocol with :class:`Limits` (``limits`` is set on a
    subclass made by :func:`protocol_class`)."""

    limits: ClassVar[Limits]
    #: the server's connection slots (one table per server, made with the class)
    slots: ClassVar[ClientSlots]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit_concurrency = None  # requests are limited here, with an S3 answer
        self._phase = RequestPhase.HEADERS
        self._header_bytes = 0
        self._last_data = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._slot = Slot.REFUSED  # none held until connection_made admits it
        self._client_key: str | None = None
        self._header_since = 0.0  # when the current wait for headers began
        self._refused = False
        # the current body: bytes received, its length as declared, its pace
        self._body_bytes = 0
        self._declared = 0
        self._pace: BodyPace | None = None
        self._paused_base = 0.0
        # responses waiting on the client (created at the first wait)
        self._stall: StallMeter | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self._stall_buffered: int | None = None  # buffered at the wait's start

    # -- connection ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = MeteredFlow(transport, self.loop.time)
        slots = self.slots
        self._client_key = client_key(self.client)
        self._slot = slots.admit(self._client_key, adopted=self.adopted())
        if self._slot is Slot.REFUSED:
            transport.abort()  # one descriptor less at once; the client sees a reset
            if self.limits.on_refused is not None:
                self.limits.on_refused()
            return
        if slots.became_busy():
            self._hurry_waiting()
        self._arm_header_timer()

    def adopted(self) -> bool:
        """Whether this connection was admitted elsewhere (a worker's hand-over)."""
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.slots.release(self._client_key, self._slot)
        self._slot = Slot.REFUSED
        self._cancel_timer()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
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
            self._body_bytes += len(data)
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
              and self._timer is None):
            self._start_body_clock()

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
        probe = self._slot is Slot.PROBE
        if probe and self.url.partition(b"?")[0] not in PROBE_PATHS:
            self._refuse(NOT_A_PROBE)
            raise _Refused()
        self._phase = RequestPhase.BODY
        self._body_bytes = 0
        self._pace = None
        if limits.max_requests is not None and len(self.tasks) >= limits.max_requests \
                and not self._admin_room(limits.max_requests + limits.admin_reserve):
            if limits.on_slowdown is not None:
                limits.on_slowdown()
            app, self.app = self.app, _slow_down
            try:
                super().on_headers_complete()
            finally:
                self.app = app
        else:
            super().on_headers_complete()
        if probe and self.cycle is not None:
            self.cycle.keep_alive = False  # one probe per probe slot
        self._declared = self._body_left  # the stated Content-Length (0: chunked)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._phase = RequestPhase.DONE
        self._header_bytes = 0
        self._cancel_timer()

    # -- timers --------------------------------------------------------------------------

    def _arm_header_timer(self) -> None:
        timeout = self._header_timeout()
        if timeout is not None:
            self._header_since = now = self.loop.time()
            self._timer = self.loop.call_at(now + timeout, self._header_late)

    def _header_timeout(self) -> float | None:
        """The header timeout: the busy one in a probe slot or while slots are busy."""
        limits = self.limits
        busy = limits.busy_header_timeout_s
        if busy is not None and (self._slot is Slot.PROBE or self.slots.busy()):
            return min(busy, limits.header_timeout_s or busy)
        return limits.header_timeout_s

    def _hurry_waiting(self) -> None:
        """Slots just became busy: every connection still waiting for headers gets the
        busy header timeout, counted from when it began to wait."""
        timeout = self._header_timeout()
        if timeout is None:
            return
        now = self.loop.time()
        for connection in self.connections:
            if isinstance(connection, LimitedHttpProtocol):
                connection._hurry(now, timeout)

    def _hurry(self, now: float, timeout: float) -> None:
        timer = self._timer
        if timer is None or self._phase is not RequestPhase.HEADERS:
            return
        deadline = max(self._header_since + timeout, now)
        if deadline < timer.when():
            timer.cancel()
            self._timer = self.loop.call_at(deadline, self._header_late)

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

    def _start_body_clock(self) -> None:
        """The body is still due after a read: watch its idle time and its pace."""
        limits = self.limits
        now = self._last_data = self.loop.time()
        delay = limits.body_idle_timeout_s or float("inf")
        if limits.pace.enabled:
            self._pace = BodyPace(limits.pace, now, self._declared)
            self._paused_base = self.flow.paused_s(now)  # type: ignore[attr-defined]
            delay = min(delay, self._pace.check(now, 0, 0.0)[1])
        if delay != float("inf"):
            self._timer = self.loop.call_later(delay, self._body_check)

    def _body_check(self) -> None:
        """A body timer fired: time out a body that stalls or is too slow, else look
        again when the next rule may fail."""
        self._timer = None
        if self._phase is not RequestPhase.BODY or self.transport.is_closing():
            return
        now = self.loop.time()
        paused = self.flow.read_paused  # the application is not reading: not the client's fault
        delay = float("inf")
        timeout = self.limits.body_idle_timeout_s
        if timeout is not None:
            idle = now - self._last_data
            if idle >= timeout and not paused:
                self._body_timeout()
                return
            delay = max(timeout - idle, 0.1)
        if self._pace is not None:
            if paused:
                delay = min(delay, 1.0)
            else:
                flow: MeteredFlow = self.flow  # type: ignore[assignment]
                received = self._declared - self._body_left if self._declared \
                    else self._body_bytes
                verdict, due = self._pace.check(now, received,
                                                flow.paused_s(now) - self._paused_base)
                if verdict is not Verdict.OK:
                    self.logger.info("request body from %s too slow (%s bytes of %s): "
                                     "RequestTimeout", self.client, received,
                                     self._declared or "?")
                    self._body_timeout()
                    return
                delay = min(delay, due)
        if delay != float("inf"):
            self._timer = self.loop.call_later(delay, self._body_check)

    def _body_timeout(self) -> None:
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            cycle.disconnected = True  # the application sees a disconnect; its sends are dropped
            self._refuse(REQUEST_TIMEOUT)
        else:
            self.transport.close()

    # -- responses the client takes too slowly --------------------------------------------

    def pause_writing(self) -> None:
        """The transport's buffer is full: writes wait on the client."""
        super().pause_writing()
        if self.limits.pace.min_rate is not None:
            self._stall_buffered = self.transport.get_write_buffer_size()
            self.write_blocked()

    def resume_writing(self) -> None:
        if self._stall is not None and self._stall_buffered is not None:
            taken = self._stall_buffered - self.transport.get_write_buffer_size()
            self._stall_buffered = None
            self._stall.unblock(self.loop.time(), max(taken, 0))
        super().resume_writing()

    def write_blocked(self) -> None:
        """Writes of the response wait for the client to take what was sent (the
        transport's buffer, or the socket's under sendfile)."""
        if self.limits.pace.min_rate is None:
            return
        if self._stall is None:
            self._stall = StallMeter(self.limits.pace)
        self._stall.block(self.loop.time())
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self.limits.pace.grace_s,
                                                     self._stall_check)

    def write_unblocked(self, taken: int) -> None:
        """The client took ``taken`` bytes (sendfile): writes go on."""
        if self._stall is not None:
            self._stall.unblock(self.loop.time(), taken)

    def wrote(self, taken: int) -> None:
        """The client took ``taken`` bytes without a wait (sendfile)."""
        if self._stall is not None:
            self._stall.took(taken)

    def _stall_check(self) -> None:
        self._stall_timer = None
        stall = self._stall
        if stall is None or not stall.blocked or self.transport.is_closing():
            return
        pending = 0
        if self._stall_buffered is not None:
            pending = max(self._stall_buffered - self.transport.get_write_buffer_size(), 0)
        slow, due = stall.check(self.loop.time(), pending)
        if slow:
            self.logger.info("response to %s taken too slowly: connection closed",
                             self.client)
            if self.cycle is not None:
                self.cycle.disconnected = True
            self.transport.abort()  # a close would wait for the client to take the rest
            return
        self._stall_timer = self.loop.call_later(due, self._stall_check)

    # -- answers -------------------------------------------------------------------------

    def _admin_room(self, limit: int) -> bool:
        """Whether the request is an admin request with room beyond ``max_requests``:
        a health check always, another admin route within ``admin_reserve``."""
        path = self.url.partition(b"?")[0]
        if path == HEALTH_PATH:
            return True
        return path.startswith(ADMIN_PREFIX) and not path.startswith(PEER_PREFIX) \
            and len(self.tasks) < limit

    def _refuse(self, answer: bytes) -> None:
        """Send ``answer`` and close the connection (the request is not served)."""
        self._refused = True
        self._cancel_timer()
        self.transport.write(answer)
        self.transport.close()

    def _header_size(self) -> int:
        return len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)


class _Refused(Exception):
    """Stops the parser after a refusal answered from a callback."""


_SLOW_DOWN_STATUS, _SLOW_DOWN_TEXT_HEADERS, _SLOW_DOWN_BODY = error_answer(SlowDown())
_SLOW_DOWN_HEADERS = [(n.encode(), v.encode()) for n, v in _SLOW_DOWN_TEXT_HEADERS]


async def _slow_down(scope: Any, receive: Any, send: Any) -> None:
    """The ASGI answer to a request beyond ``max_requests``."""
    await send({"type": "http.response.start", "status": _SLOW_DOWN_STATUS,
                "headers": list(_SLOW_DOWN_HEADERS)})
    await send({"type": "http.response.body", "body": _SLOW_DOWN_BODY})


def slot_table(limits: Limits) -> ClientSlots:
    """A server's connection slots under ``limits``."""
    return ClientSlots(SlotLimits(max_connections=limits.max_connections,
                                  per_client=limits.max_connections_per_client))


def protocol_class(limits: Limits, router: Router | None = None
                   ) -> type[LimitedHttpProtocol]:
    """The protocol class uvicorn builds for each connection of one server, with
    ``limits``, the server's slot table, and the router that relays some requests
    (:mod:`gateway.http.relaying`)."""
    return type("LimitedHttpProtocol", (LimitedHttpProtocol,),
                {"limits": limits, "slots": slot_table(limits), "router": router})
