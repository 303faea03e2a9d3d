"""``squall serve --workers N``: the parent process that runs and watches N workers.

The parent checks the settings and the data directory's layout, generates the
credentials and (if none is set) an ephemeral cluster secret, binds the port, then
starts each worker (``python -m gateway.http.workers.worker``) with the listening socket and
one end of a control socket pair. It serves no requests itself.

* A worker that exits while the gateway runs is started again (its cache replays its
  index; meanwhile its keys answer 503, as a cluster member's do). Repeated failures back
  off up to ``MAX_BACKOFF_S``.
* SIGTERM/SIGINT: every worker drains the shared port (in-flight requests finish, and
  may still be forwarded to other workers), then all stop; exit status 0. A second
  signal kills the workers at once (like ``kill -9``: nothing acknowledged is lost).
* A worker that cannot start at launch stops the whole gateway with its message and a
  non-zero status.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import sys
import time

from gateway.auth.credentials import Credentials, load_or_create
from gateway.config.settings import Settings
from gateway.http.server import GRACEFUL_SHUTDOWN_S, configure_logging, print_banner
from gateway.http.workers import control, layout, plan
from gateway.http.workers.sockets import RUN_DIR, Port, run_dir, socket_path

log = logging.getLogger("squall.workers")
MIN_BACKOFF_S = 0.5
MAX_BACKOFF_S = 10.0
STABLE_S = 10.0  # a worker up this long resets its backoff
STOP_MARGIN_S = 15.0


class State(enum.Enum):
    STARTING = "starting"
    UP = "up"
    DRAINED = "drained"
    EXITED = "exited"


class WorkerProcess:
    """One worker: its process, control stream and state (changed by its reader task)."""

    def __init__(self, index: int, config: bytes, port: Port) -> None:
        self.index = index
        self._config = config
        self._port = port
        self.state = State.EXITED
        self.process: asyncio.subprocess.Process | None = None
        self.error: tuple[int, str] | None = None
        self.changed = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self.started_at = 0.0

    async def spawn(self) -> None:
        parent_end, child_end = socket.socketpair()
        listener = self._port.for_worker()
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.http.workers.worker", str(self.index),
                "--control-fd", str(child_end.fileno()),
                "--listen-fd", str(listener.fileno()),
                pass_fds=(child_end.fileno(), listener.fileno()),
                stdin=asyncio.subprocess.DEVNULL)
        finally:
            child_end.close()
            self._port.release(listener)
        self.state, self.error, self.started_at = State.STARTING, None, time.monotonic()
        reader, self._writer = await asyncio.open_connection(sock=parent_end)
        self._writer.write(self._config)
        self._reader_task = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while line := (await reader.readline()).decode().strip():
            if line == control.READY:
                self._set(State.UP)
            elif line == control.DRAINED:
                self._set(State.DRAINED)
            elif line.startswith(control.ERROR):
                self.error = control.parse_error(line)
                self.changed.set()
        assert self.process is not None
        await self.process.wait()
        self._set(State.EXITED)

    def _set(self, state: State) -> None:
        self.state = state
        self.changed.set()

    async def until(self, *states: State) -> State:
        while self.state not in states:
            self.changed.clear()
            await self.changed.wait()
        return self.state

    def send(self, command: str) -> None:
        if self._writer is not None and self.state is not State.EXITED:
            with contextlib.suppress(OSError, RuntimeError):
                self._writer.write(f"{command}\n".encode())

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)

    def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    async def close(self) -> None:
        if self._reader_task is not None:
            await self._reader_task
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class Supervisor:
    def __init__(self, workers: list[WorkerProcess]) -> None:
        self.workers = workers
        self._stopping = asyncio.Event()
        self._forced = False

    def _signal(self) -> None:
        if self._stopping.is_set():
            if not self._forced:
                log.warning("second signal: killing the workers now")
                self._forced = True
                for worker in self.workers:
                    worker.kill()
            return
        log.info("stopping: the workers finish their requests")
        self._stopping.set()

    def _reload(self) -> None:
        """SIGHUP: every worker reloads its TLS certificate."""
        for worker in self.workers:
            worker.signal(signal.SIGHUP)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signal)
        loop.add_signal_handler(signal.SIGHUP, self._reload)
        try:
            failure = await self._start_all()
            if failure is not None:
                code, message = failure
                print(f"squall: {message}", file=sys.stderr, flush=True)
                await self._stop_all()
                return code
            if not self._stopping.is_set():
                log.info("%d workers up", len(self.workers))
            watchers = [asyncio.ensure_future(self._watch(w)) for w in self.workers]
            await self._stopping.wait()
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
            await self._stop_all()
            return 0
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)

    async def _start_all(self) -> tuple[int, str] | None:
        for worker in self.workers:
            await worker.spawn()
        states = await asyncio.gather(*(w.until(State.UP, State.EXITED) for w in self.workers))
        for worker, state in zip(self.workers, states, strict=True):
            if state is State.UP:
                continue
            if worker.error is None:
                assert worker.process is not None
                message = (f"worker {worker.index} exited with status "
                           f"{worker.process.returncode} while starting (see its log above)")
                worker.error = (1, message)
            return worker.error
        return None

    async def _watch(self, worker: WorkerProcess) -> None:
        """Start the worker again whenever it exits, backing off while it keeps failing."""
        backoff = MIN_BACKOFF_S
        while True:
            await worker.until(State.EXITED)
            await worker.close()
            assert worker.process is not None
            up_for = time.monotonic() - worker.started_at
            if up_for >= STABLE_S:
                backoff = MIN_BACKOFF_S
            reason = f": {worker.error[1]}" if worker.error else ""
            log.warning("worker %d (pid %d) exited with status %s after %.1f s%s; starting "
                        "it again in %.1f s", worker.index, worker.process.pid,
                        worker.process.returncode, up_for, reason, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            await worker.spawn()
            if await worker.until(State.UP, State.EXITED) is State.UP:
                log.warning("worker %d is up again (pid %d)", worker.index,
                            worker.process.pid)

    async def _stop_all(self) -> None:
        """Drain every worker's share of the port, then stop them all."""
        limit = GRACEFUL_SHUTDOWN_S + STOP_MARGIN_S
        running = [w for w in self.workers if w.state is not State.EXITED]
        for worker in running:
            worker.send(control.DRAIN)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(
                *(w.until(State.DRAINED, State.EXITED) for w in running)), limit)
        for worker in running:
            worker.send(control.STOP)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(
                *(w.until(State.EXITED) for w in running)), limit)
        for worker in running:
            if worker.state is not State.EXITED:
                log.error("worker %d did not stop in time: killed", worker.index)
                worker.kill()
        await asyncio.gather(*(w.close() for w in self.workers if w.process is not None))


def serve_workers(settings: Settings) -> int:
    """Run the gateway as ``settings.workers`` processes until SIGTERM/SIGINT; the exit
    status. ValueError with a readable message for what cannot start."""
    configure_logging(settings)
    plan.check(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    credentials = load_or_create(settings.data_dir, settings.access_key, settings.secret_key)
    layout.prepare(settings.data_dir, settings.workers, keep=plan.volumes(settings))
    secret = settings.cluster_secret or secrets.token_hex(16)
    configs = [plan.worker_settings(settings, k, credentials, secret)
               for k in range(settings.workers)]
    address = settings.listen_address
    port = Port(address.host, address.port)
    sockets_dir = run_dir(settings.data_dir, settings.workers)
    paths = [str(socket_path(sockets_dir, k)) for k in range(settings.workers)]
    # With --peers the workers are members of the hosts' ring (plan.py).
    hosts = {"host_workers": settings.workers} if settings.peers or settings.coordinator \
        else {}
    lines = [(json.dumps({"settings": c.model_dump(mode="json"), "sockets": paths, **hosts})
              + "\n").encode() for c in configs]
    _banner(settings, credentials, port.port)
    supervisor = Supervisor([WorkerProcess(k, lines[k], port)
                             for k in range(settings.workers)])
    try:
        return asyncio.run(supervisor.run())
    finally:
        port.close()
        for path in paths:
            with contextlib.suppress(OSError):
                os.unlink(path)
        if sockets_dir.name != RUN_DIR:
            shutil.rmtree(sockets_dir, ignore_errors=True)


def _banner(settings: Settings, credentials: Credentials, port: int) -> None:
    print_banner(settings, credentials, port, f" ({settings.workers} worker processes)")

