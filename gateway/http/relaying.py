"""Requests passed on as bytes, before the application sees them.

A :class:`Router` (a cluster member's: :mod:`gateway.cluster.relay`) looks at each request
once its head is parsed. A request it takes is not turned into an ASGI call: the router
sends it on to another server and writes that server's answer to the client byte for byte
(:class:`Downstream`), the body read from the connection as it arrives. Everything else of
the connection stays as it is: its limits, timeouts, flow control and keep-alive.

A router that fails before writing anything raises a :class:`StorageError`: the client
gets its S3 answer and the connection is closed; one that fails after it began the answer
aborts the connection (the client sees a cut answer, never a wrong one).
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Protocol, cast

from starlette.types import Receive, Scope
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from backends.core.errors import StorageError
from gateway.http.answers import closing_answer
from gateway.http.zerocopy import ZeroCopyHttpProtocol
from gateway.protocol.errors import InternalError


class Downstream:
    """The client's side of a relayed request: what the answer is written to."""

    __slots__ = ("_protocol", "started")

    def __init__(self, protocol: RelayingHttpProtocol) -> None:
        self._protocol = protocol
        self.started = False  # some of the answer was written

    def write(self, data: bytes) -> None:
        self.started = True
        self._protocol.transport.write(data)

    def follow(self, upstream: asyncio.ReadTransport | None) -> None:
        """Pause reading ``upstream`` while the client's send buffer is full (None: stop)."""
        self._protocol.follow(upstream)

    @property
    def gone(self) -> bool:
        """Whether the client's connection is closed (nothing more reaches it)."""
        return self._protocol.transport.is_closing()


class Router(Protocol):
    """Decides which requests are relayed, and relays them."""

    def route(self, scope: Scope) -> Any | None:
        """Where the request goes (None: the application serves it)."""

    async def relay(self, destination: Any, scope: Scope, receive: Receive,
                    client: Downstream) -> bool:
        """Send the request to ``destination`` and its whole answer to ``client``;
        whether the client's connection may serve another request."""


class RelayingHttpProtocol(ZeroCopyHttpProtocol):
    """The zero-copy protocol whose requests a :class:`Router` may take (``router`` is
    set on a subclass; None: none is taken)."""

    router: ClassVar[Router | None] = None
    _upstream: asyncio.ReadTransport | None = None  # read as the client takes the answer

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        router = self.router
        destination = router.route(cast(Scope, cycle.scope)) if router is not None else None
        if router is None or destination is None:
            super()._start_asgi_task(cycle, app)
            return
        task = self.loop.create_task(self._relay(router, destination, cycle))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    async def _relay(self, router: Router, destination: Any,
                     cycle: RequestResponseCycle) -> None:
        # "100 Continue" goes to the client when the router first reads the body (it asks
        # the destination first when that matters).
        client = Downstream(self)
        keep = failed = False
        try:
            keep = await router.relay(destination, cast(Scope, cycle.scope),
                                      cast(Receive, cycle.receive), client)
        except StorageError as exc:
            failed = True
            if not client.started and not self.transport.is_closing():
                self.transport.write(closing_answer(exc))
        except Exception:
            failed = True
            self.logger.exception("relaying %s %s failed", cycle.scope["method"],
                                  cycle.scope["path"])
            if not client.started and not self.transport.is_closing():
                self.transport.write(closing_answer(InternalError()))
        finally:
            self.follow(None)
            cycle.response_started = cycle.response_complete = True
            cycle.message_event.set()
        if failed and client.started:
            self.transport.abort()  # a cut answer, never a wrong one
        elif failed or not keep or not cycle.keep_alive:
            self.transport.close()
        else:
            cycle.on_response()

    def follow(self, upstream: asyncio.ReadTransport | None) -> None:
        """Read ``upstream`` only while the client takes what is written (None: stop)."""
        if upstream is None and self._upstream is not None and self.flow.write_paused:
            self._upstream.resume_reading()
        self._upstream = upstream
        if upstream is not None and self.flow.write_paused:
            upstream.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self._upstream is not None:  # read on: the relay sees the client is gone
            self._upstream.resume_reading()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._upstream is not None:
            self._upstream.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._upstream is not None:
            self._upstream.resume_reading()
