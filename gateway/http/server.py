"""Runs the gateway under uvicorn (uvloop + httptools) with a graceful SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
import sys
from collections.abc import Iterator
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from gateway.app import build_app
from gateway.auth.credentials import Credentials, load_or_generate, save
from gateway.client.tls import ServerTls, tls_files
from gateway.components import Components, build_components
from gateway.config.humanize import format_bytes
from gateway.config.settings import Settings
from gateway.dashboard.access import dashboard_line
from gateway.http.limits import Limits, protocol_class
from gateway.http.pace import PaceLimits
from gateway.http.relaying import Router
from gateway.http.slots import per_client_default
from gateway.metrics import Metrics

GRACEFUL_SHUTDOWN_S = 30
#: allocations (less deallocations) between two young-generation collections (default 700)
GC_THRESHOLD = 20_000


def configure_logging(settings: Settings) -> None:
    # The format uses none of the caller, thread or process fields: not computing them
    # per record (the logging HOWTO's "Optimization") saves ~20 % of an access-log line.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging.basicConfig(level=settings.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("squall.access").setLevel(
        logging.INFO if settings.access_log else logging.WARNING)


def tune_gc() -> None:
    """Collect garbage less often: a request allocates many short-lived objects, and
    the default thresholds run a collection every few requests. What start-up built
    (modules, the app, settings) is frozen out of every collection."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, 20, 50)


def serve(settings: Settings, credentials: Credentials | None = None,
          sock: socket.socket | None = None) -> None:
    """Start the gateway and block until SIGTERM/SIGINT (in-flight requests finish).

    ``credentials`` and ``sock`` come from :func:`gateway.config.preflight.preflight`: a
    generated pair is saved only once the components are built, and ``sock`` is the
    listening socket already bound (so a taken port fails before anything is written)."""
    configure_logging(settings)
    if credentials is None:
        credentials = load_or_generate(settings.data_dir, settings.access_key,
                                       settings.secret_key)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    components = build_components(settings, credentials)
    if credentials.generated:
        save(settings.data_dir, credentials)
    port = sock.getsockname()[1] if sock is not None else settings.listen_address.port
    print_banner(settings, credentials, port)
    tune_gc()
    tls = server_tls(settings)
    router = components.cluster.relay(domain=settings.domain) \
        if components.cluster is not None else None
    server = _GracefulServer(uvicorn_config(build_app(components), settings, tls=tls,
                                            metrics=components.metrics, router=router))
    server.tls = tls
    server.run(sockets=[sock] if sock is not None else None)
    warn_unflushed(components)


def warn_unflushed(components: Components) -> None:
    """On exit: say how much dirty data stays in the cache (flushed at the next start)."""
    cache = components.cache
    if cache is None:
        return
    count, size = cache.store.dirty_count, cache.store.dirty_bytes
    if count:
        print(f"squall: {count} object(s), {format_bytes(size)}, not yet on the backend: "
              f"kept in the cache under {components.settings.data_dir}, flushed when the "
              "gateway starts again (`squall sync` before stopping waits for them)",
              file=sys.stderr, flush=True)


def print_banner(settings: Settings, credentials: Credentials, port: int,
                 detail: str = "") -> None:
    """The start-up lines: address, backend, the dashboard and how to get in, where the
    credentials come from (the secret itself only when it was just generated), and a
    cluster member's place and secrets."""
    address = settings.listen_address
    scheme = "https" if settings.tls_cert is not None else "http"
    print(f"Squall S3 gateway on {scheme}://{address.host}:{port}{detail}", flush=True)
    print(f"  backend: {settings.backend_spec.kind}:{settings.backend_spec.args}", flush=True)
    print(dashboard_line(settings, scheme, port), flush=True)
    if credentials.generated:
        print(f"  generated credentials (kept in {credentials.path}):\n"
              f"    access key: {credentials.access_key}\n"
              f"    secret key: {credentials.secret_key}", flush=True)
    elif credentials.path is not None:
        print(f"  access key: {credentials.access_key} (secret key in {credentials.path})",
              flush=True)
    else:
        print(f"  access key: {credentials.access_key} (secret key from the settings: "
              "SQUALL_SECRET_KEY or the config file)", flush=True)
    clustering = settings.clustering() if settings.peers or settings.coordinator else None
    if clustering is not None and clustering.coordinator is not None:
        print(f"  cluster: member {clustering.advertise_url}, coordinated by "
              f"{clustering.coordinator.url} (lease {clustering.coordinator.lease_ttl_s} s, "
              f"{clustering.dirty_replicas} copies of unflushed writes); S3 credentials and "
              "the cluster secret (SQUALL_CLUSTER_SECRET) must be the same on every member",
              flush=True)
    elif clustering is not None and clustering.ring is not None:
        ring = clustering.ring
        print(f"  cluster: member {ring.self_index} of {len(ring.members)} "
              f"({ring.members[ring.self_index]}), a fixed member list; S3 credentials and "
              "the cluster secret (SQUALL_CLUSTER_SECRET) must be the same on every member",
              flush=True)


def limits_of(settings: Settings, metrics: Metrics | None = None) -> Limits:
    """The HTTP protocol's limits from the settings (0 turns one off); ``metrics`` counts
    the requests refused for ``max_requests`` and the connections refused."""
    per_client = settings.max_connections_per_client
    if per_client is None and settings.max_connections:
        per_client = per_client_default(settings.max_connections)
    return Limits(header_timeout_s=settings.header_timeout or None,
                  body_idle_timeout_s=settings.body_idle_timeout or None,
                  max_header_bytes=settings.max_header_bytes,
                  max_header_count=settings.max_header_count,
                  max_connections=settings.max_connections or None,
                  max_connections_per_client=per_client or None,
                  busy_header_timeout_s=settings.header_timeout_busy or None,
                  max_requests=settings.max_requests or None,
                  on_slowdown=metrics.count_slowdown if metrics else None,
                  on_refused=metrics.count_connection_refused if metrics else None,
                  pace=PaceLimits(min_rate=settings.body_min_rate or None,
                                  grace_s=settings.body_rate_grace,
                                  deadline_s=settings.body_deadline or None,
                                  deadline_rate=settings.body_deadline_rate or None))


def server_tls(settings: Settings) -> ServerTls | None:
    """The listening port's TLS context from ``--tls-cert``/``--tls-key`` (None: plain
    HTTP); ValueError (one line) for files that do not load."""
    files = tls_files(settings.tls_cert, settings.tls_key)
    return None if files is None else ServerTls(files)


def reload_on_sighup(tls: ServerTls | None) -> None:
    """Reload the certificate on SIGHUP (call on the running event loop)."""
    if tls is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, tls.reload)


def uvicorn_config(app: ASGIApp, settings: Settings, *,
                   metrics: Metrics | None = None, tls: ServerTls | None = None,
                   router: Router | None = None, **overrides: Any) -> uvicorn.Config:
    """The uvicorn options of a gateway process; ``overrides`` replace some (the worker
    processes of ``--workers N`` serve given sockets and run the lifespan themselves).
    ``metrics`` counts what the limits refuse (:func:`limits_of`); ``tls`` serves HTTPS
    with that context; ``router`` relays some requests (:mod:`gateway.http.relaying`)."""
    address = settings.listen_address
    options: dict[str, Any] = {
        "host": address.host, "port": address.port, "loop": "uvloop",
        "http": protocol_class(limits_of(settings, metrics), router),
        "timeout_keep_alive": settings.keep_alive_timeout,
        "lifespan": "on", "access_log": False, "log_level": settings.log_level,
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S, "server_header": False,
        "date_header": True,
        # Nothing reads the client address or scheme (SigV4 signs the Host header): no
        # X-Forwarded-* middleware on every request.
        "proxy_headers": False}
    if tls is not None:
        context = tls.context
        options["ssl_context_factory"] = lambda config, default: context
    return uvicorn.Config(app, **{**options, **overrides})


class _GracefulServer(uvicorn.Server):
    """A uvicorn server whose SIGTERM/SIGINT end in a clean exit (status 0).

    uvicorn re-raises a captured signal after its graceful shutdown, which would make
    every orderly stop look like a crash to supervisors; the shutdown itself is unchanged.
    With ``tls`` set, SIGHUP reloads the certificate.
    """

    tls: ServerTls | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        reload_on_sighup(self.tls)
        await super().startup(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            yield
            self._captured_signals.clear()
