"""One worker process of ``squall serve --workers N`` (started by the supervisor only).

``python -m gateway.http.workers.worker K --control-fd A --listen-fd B``: reads its settings
from the control socket, builds the gateway (a cluster member whose peers are the other
workers), and serves two uvicorn servers on one event loop: the shared port (inherited
socket) and its own Unix socket for the other workers. Stopping takes two steps so that a
request forwarded between workers is never cut: ``drain`` stops the shared port and
finishes its requests (the others still forward to this worker meanwhile), ``stop``
closes the Unix socket and the cache once every worker has drained.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import logging
import signal
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import uvicorn
import uvloop
from pydantic import ValidationError

from gateway.app import build_app, user_directory
from gateway.auth.credentials import Credentials
from gateway.client.tls import ServerTls
from gateway.cluster.node import describe_single
from gateway.components import Components, build_components
from gateway.config.settings import Settings
from gateway.http.server import (
    GRACEFUL_SHUTDOWN_S,
    configure_logging,
    limits_of,
    reload_on_sighup,
    server_tls,
    tune_gc,
    uvicorn_config,
)
from gateway.http.workers import control, handover
from gateway.http.workers.front import WorkerFront
from gateway.http.workers.host import HostWorkers
from gateway.http.workers.links import WorkerLinks
from gateway.http.workers.relay import WorkerRelay
from gateway.http.workers.sockets import BACKLOG, unix_listener

log = logging.getLogger("squall.workers")


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals alone: the worker decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Worker:
    """The running worker: its components, two servers and the control stream."""

    def __init__(self, index: int, settings: Settings, components: Components,
                 sockets: Sequence[str], listener: socket.socket,
                 control_sock: socket.socket, tls: ServerTls | None = None) -> None:
        self.index = index
        self.tls = tls  # the shared port's (the Unix socket between workers is plain)
        self.settings = settings
        self.components = components
        self.sockets = list(sockets)
        self.listener = listener
        self.control_sock = control_sock
        self.links = WorkerLinks(self.sockets)
        self._stop_now = asyncio.Event()
        self.sender: handover.HandoverSender | None = None
        self.handover_stats = handover.HandoverStats()
        assert components.cluster is not None
        self.cluster = components.cluster
        self.host = HostWorkers.of(self.cluster.name, index, len(sockets))
        # in a cluster of hosts, other hosts' peer requests for another worker of this one
        self.relay = WorkerRelay(sockets) if self.host.in_cluster else None

    def _config(self, app: object, tls: ServerTls | None = None,
                **overrides: Any) -> uvicorn.Config:
        level = "debug" if self.settings.log_level == "debug" else "warning"
        return uvicorn_config(app, self.settings, lifespan="off", log_config=None,  # type: ignore[arg-type]
                              log_level=level, tls=tls,
                              metrics=self.components.metrics, **overrides)

    def _handover_protocol(self) -> type[handover.HandoverHttpProtocol] | None:
        """The public port's protocol with connection hand-over (docs/workers.md), when
        it is on and the port is plain HTTP (TLS state cannot move: proxied)."""
        cluster = self.components.cluster
        if (not self.settings.worker_handover or not handover.SUPPORTED
                or self.tls is not None or cluster is None):
            return None
        self.sender = handover.HandoverSender(
            {k: handover.handover_path(path) for k, path in enumerate(self.sockets)
             if k != self.index}, self.handover_stats)
        owners = handover.KeyOwners(cluster.membership, self.settings.domain, self.host)
        limits = limits_of(self.settings, self.components.metrics)
        return handover.protocol_class(limits, owners, self.sender)

    async def run(self) -> int:
        reader, writer = await asyncio.open_connection(sock=self.control_sock)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self._stop_now.set)
        reload_on_sighup(self.tls)  # the supervisor passes its SIGHUP on
        try:
            users = user_directory(self.components)
            await self.components.start()
            peer_sock = unix_listener(Path(self.sockets[self.index]))
            self.listener.listen(BACKLOG)  # the kernel sends connections from now on
        except Exception as exc:
            log.exception("worker %d cannot start", self.index)
            writer.write(control.error_line(1, f"worker {self.index} cannot start: {exc}"))
            await writer.drain()
            await self.components.stop()
            return 1
        watch = users.watcher()  # users changed by other workers
        watch.start()
        app = build_app(self.components, users)
        hosts = self.relay is not None  # a member of a cluster of hosts
        front = WorkerFront(app, index=self.index, links=self.links,
                            status=self.components.status, gate=app.gate,
                            relay=(self.host, self.relay) if self.relay else None,
                            ring_view=self.cluster.describe if hosts else describe_single)
        own = WorkerFront(app, index=self.index, links=self.links,
                          status=self.components.status, fan_out=False)
        peer = _Server(self._config(own))
        protocol = self._handover_protocol()
        if protocol is not None:
            front.handover = own.handover = self.handover_stats
        public = _Server(self._config(front, self.tls) if protocol is None
                         else self._config(front, self.tls, http=protocol))
        receiver: handover.HandoverReceiver | None = None
        peer_task = asyncio.ensure_future(peer.serve(sockets=[peer_sock]))
        public_task = asyncio.ensure_future(public.serve(sockets=[self.listener]))
        try:
            try:
                await _started(peer, peer_task)
                await _started(public, public_task)
                if protocol is not None:  # adopts into the public server, once it runs
                    receiver = handover.HandoverReceiver(
                        handover.handover_path(self.sockets[self.index]),
                        handover.adopter(public), self.handover_stats)
                    receiver.start()
            except Exception as exc:
                log.exception("worker %d cannot serve", self.index)
                writer.write(control.error_line(1, f"worker {self.index} cannot serve: {exc}"))
                await writer.drain()
                return 1
            writer.write(f"{control.READY}\n".encode())
            await writer.drain()
            command = await self._wait(reader, {public_task, peer_task})
            public.should_exit = True
            await public_task
            if command == control.DRAIN:  # the others may still forward to this worker
                writer.write(f"{control.DRAINED}\n".encode())
                with contextlib.suppress(OSError):
                    await writer.drain()
                await self._wait(reader, {peer_task})
            if receiver is not None:  # every worker has drained: nothing more comes
                receiver.close()
                await handover.finish(public, GRACEFUL_SHUTDOWN_S)
            peer.should_exit = True
            await peer_task
        finally:
            if receiver is not None:
                receiver.close()
            if self.sender is not None:
                self.sender.close()
            for task in (public_task, peer_task):
                task.cancel()
            await watch.stop()
            await self.links.aclose()
            if self.relay is not None:
                await self.relay.aclose()
            await self.components.stop()
        return 0

    async def _wait(self, reader: asyncio.StreamReader, tasks: set[asyncio.Future[None]]
                    ) -> str:
        """The parent's next command (drain, stop); "" for SIGTERM, EOF (the parent is
        gone) or a server that ended on its own."""
        command = asyncio.ensure_future(reader.readline())
        signalled = asyncio.ensure_future(self._stop_now.wait())
        try:
            waited: set[asyncio.Future[Any]] = {command, signalled, *tasks}
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        finally:
            command.cancel()
            signalled.cancel()
        if command.done() and not command.cancelled() and command.exception() is None:
            return str(command.result().strip().decode())
        return ""


async def _started(server: uvicorn.Server, task: asyncio.Future[None]) -> None:
    while not server.started:
        if task.done():
            task.result()  # its exception, if any
            raise RuntimeError("the server stopped while starting")
        await asyncio.sleep(0.01)


def _configure_logging(settings: Settings, index: int) -> None:
    """The gateway's logging, each line naming the worker."""
    configure_logging(settings)
    tagged = logging.Formatter(f"%(asctime)s %(levelname)s worker-{index} %(name)s "
                               "%(message)s")
    for handler in logging.getLogger().handlers:
        handler.setFormatter(tagged)


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Be SIGKILLed when the parent dies (Linux prctl): a gateway whose parent crashed
    goes down whole, as a crash (which the cache tier survives), instead of leaving
    workers that serve the port and hold the data directory with no supervisor. A parent
    that stops normally stops its workers first, so this fires only on a crash."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def main(argv: Sequence[str] | None = None) -> int:
    _die_with_parent()
    parser = argparse.ArgumentParser(prog="squall-worker")
    parser.add_argument("index", type=int)
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--listen-fd", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops us
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a certificate reload, handled with TLS
    control_sock = socket.socket(fileno=args.control_fd)
    listener = socket.socket(fileno=args.listen_fd)
    try:
        config = control.read_config(control_sock)
        settings = Settings(**config["settings"])
        sockets = [str(p) for p in config["sockets"]]
        _configure_logging(settings, args.index)
        assert settings.access_key is not None and settings.secret_key is not None
        tls = server_tls(settings)
        host_workers = int(config.get("host_workers", 1))
        components = build_components(
            settings, Credentials(settings.access_key, settings.secret_key),
            host_worker=(args.index, host_workers) if host_workers > 1 else (0, 1))
    except EOFError:
        return 1
    except (ValueError, ValidationError, KeyError) as exc:
        control_sock.sendall(control.error_line(2, str(exc)))
        return 2
    assert components.cluster is not None
    worker = Worker(args.index, settings, components, sockets, listener, control_sock, tls)
    components.cluster.transport.use_unix_sockets(
        dict(zip(worker.host.names, sockets, strict=True)))
    tune_gc()
    return uvloop.run(worker.run())


if __name__ == "__main__":
    sys.exit(main())
