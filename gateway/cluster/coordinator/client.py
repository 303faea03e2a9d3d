"""The connection to etcd: aetcd's asyncio client over one endpoint at a time.

aetcd speaks etcd's v3 gRPC API. What it leaves to its user is done here:

* **Several endpoints.** A call that fails or times out closes the connection and the
  next call goes to the next endpoint; so does every open watch (it raises
  :class:`CoordinatorUnavailable`, and its owner starts it again from the revision it
  reached). A member of etcd cut off from the others stops answering in time (it has no
  leader: every request carries ``hasleader``, so etcd refuses instead of serving stale
  data), and the client moves on.
* **TLS** (``etcds://``, ``--etcd-ca``, ``--etcd-cert``/``--etcd-key``) and **user and
  password** (etcd's token authentication).
* **Deadlines**: every call has one, so a blackholed endpoint costs one timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import aetcd
import grpc
from aetcd import rpc, watcher

from backends.core.errors import ServiceUnavailable
from gateway.cluster.coordinator.settings import CoordinatorSettings

log = logging.getLogger("squall.cluster")
T = TypeVar("T")
#: what a failed exchange with etcd raises in aetcd and grpc
ERRORS = (aetcd.ClientError, grpc.RpcError, OSError, asyncio.TimeoutError)
_CHANNEL_OPTIONS = {
    # A dead connection is found by the deadline of the next call (a keep-alive every
    # second); HTTP/2 pings no more often than etcd allows (--grpc-keepalive-min-time, 5 s:
    # a client that pings more often is sent away).
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
}


class CoordinatorUnavailable(ServiceUnavailable):
    """etcd cannot be reached (or has no leader) from this member now."""


class _Client(aetcd.Client):
    """aetcd's client with TLS and the ``hasleader`` requirement on every call."""

    def __init__(self, host: str, port: int, settings: CoordinatorSettings,
                 timeout: float) -> None:
        super().__init__(host=host, port=port, username=settings.user,
                         password=settings.password, timeout=timeout,
                         options=_CHANNEL_OPTIONS)
        self._settings = settings

    async def connect(self) -> None:  # (aetcd's, with a secure channel and hasleader)
        if self._connected.is_set():
            return
        target = f"{self._host}:{self._port}"
        options = list(self._options.items())
        settings = self._settings
        if settings.tls:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=settings.ca.read_bytes() if settings.ca else None,
                private_key=settings.key.read_bytes() if settings.key else None,
                certificate_chain=settings.cert.read_bytes() if settings.cert else None)
            self.channel = grpc.aio.secure_channel(target, credentials, options=options)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=options)
        metadata: list[tuple[str, str]] = [("hasleader", "true")]
        if self._username is not None:
            self.auth_stub = rpc.AuthStub(self.channel)
            reply = await self.auth_stub.Authenticate(
                rpc.AuthenticateRequest(name=self._username, password=self._password),
                timeout=self._timeout)
            metadata.append(("token", reply.token))
        self.metadata = tuple(metadata)
        self.kvstub = rpc.KVStub(self.channel)
        self.clusterstub = rpc.ClusterStub(self.channel)
        self.leasestub = rpc.LeaseStub(self.channel)
        self.maintenancestub = rpc.MaintenanceStub(self.channel)
        self._watcher = watcher.Watcher(rpc.WatchStub(self.channel), timeout=self._timeout,
                                        metadata=self.metadata)
        self._connected.set()


class EtcdClient:
    """Calls to etcd through one endpoint at a time, moving on when one fails."""

    def __init__(self, settings: CoordinatorSettings, *, timeout_s: float = 2.0) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self._index = 0
        self._client: _Client | None = None
        self._rotated = asyncio.Event()  # set (and replaced) each time the endpoint changes
        self._lock = asyncio.Lock()

    @property
    def endpoint(self) -> str:
        host, port = self.settings.endpoints[self._index]
        return f"{host}:{port}"

    async def _current(self) -> _Client:
        async with self._lock:
            if self._client is None:
                host, port = self.settings.endpoints[self._index]
                client = _Client(host, port, self.settings, self.timeout_s)
                await asyncio.wait_for(client.connect(), self.timeout_s)
                self._client = client
            return self._client

    async def _drop(self, client: _Client | None, exc: BaseException) -> None:
        """``client`` failed: close it and use the next endpoint from now on."""
        async with self._lock:
            if client is not None and client is not self._client:
                return  # already replaced
            failed = self.endpoint
            self._client = None
            self._index = (self._index + 1) % len(self.settings.endpoints)
            rotated, self._rotated = self._rotated, asyncio.Event()
            rotated.set()
        log.info("etcd at %s failed (%s): trying %s", failed, _describe(exc), self.endpoint)
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), self.timeout_s)

    async def call(self, operation: Callable[[aetcd.Client], Awaitable[T]],
                   timeout: float | None = None) -> T:  # noqa: ASYNC109 (gRPC deadlines)
        """Run ``operation`` on the current endpoint within the deadline;
        CoordinatorUnavailable (and the next endpoint for the next call) if it fails."""
        client: _Client | None = None
        try:
            client = await self._current()
            return await asyncio.wait_for(operation(client), timeout or self.timeout_s)
        except asyncio.CancelledError as exc:
            if _cancelling():
                raise
            # (gRPC cancels the calls of a channel another call's failure closed)
            raise CoordinatorUnavailable(f"etcd at {self.endpoint}: the call was cut "
                                         "short") from exc
        except ERRORS as exc:
            await self._drop(client, exc)
            raise CoordinatorUnavailable(
                f"etcd at {self.endpoint} cannot be reached: {_describe(exc)}") from exc

    async def watch(self, prefix: bytes, start_revision: int) -> AsyncIterator[Any]:
        """The events under ``prefix`` from ``start_revision`` on, one by one, until the
        endpoint fails or changes (CoordinatorUnavailable: watch again from the revision
        reached)."""
        client: _Client | None = None
        try:
            client = await self._current()
            rotated = self._rotated
            watch = await asyncio.wait_for(
                client.watch_prefix(prefix, start_revision=start_revision), self.timeout_s)
        except asyncio.CancelledError as exc:
            if _cancelling():
                raise
            raise CoordinatorUnavailable("the etcd watch was cut short") from exc
        except ERRORS as exc:
            if not isinstance(exc, aetcd.RevisionCompactedError):
                await self._drop(client, exc)
            raise CoordinatorUnavailable(f"cannot watch etcd: {_describe(exc)}") from exc
        events = aiter(watch)
        try:
            while True:
                step = asyncio.ensure_future(anext(events))
                stop = asyncio.ensure_future(rotated.wait())
                try:
                    await asyncio.wait({step, stop}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stop.cancel()
                    if not step.done():
                        # Cancelled here (the member stops) or the endpoint changed: the
                        # pending step ends when the watch is cancelled below, and what it
                        # ends with (StopAsyncIteration) is nobody's to report.
                        step.cancel()
                        step.add_done_callback(_retrieved)
                if not step.done():
                    raise CoordinatorUnavailable("the etcd endpoint changed")
                try:
                    yield step.result()
                except StopAsyncIteration:
                    raise CoordinatorUnavailable("the etcd watch ended") from None
                except asyncio.CancelledError as exc:
                    if _cancelling():
                        raise
                    raise CoordinatorUnavailable("the etcd watch was cut short") from exc
                except ERRORS as exc:
                    await self._drop(client, exc)
                    raise CoordinatorUnavailable(f"the etcd watch failed: "
                                                 f"{_describe(exc)}") from exc
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(watch.cancel(), self.timeout_s)

    async def aclose(self) -> None:
        async with self._lock:
            client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), self.timeout_s)


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Take a finished, abandoned task's outcome, so that asyncio does not log it as
    "never retrieved"."""
    if not task.cancelled():
        task.exception()


def _cancelling() -> bool:
    """Whether the running task itself is being cancelled (not a call under it)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, grpc.RpcError):
        return str(exc.details()) if hasattr(exc, "details") else type(exc).__name__
    return str(exc) or type(exc).__name__
