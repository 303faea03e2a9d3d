"""BackendWatch over a real S3Backend and real loopback servers: a store that accepts
connections but never answers (a stopped server) counts as unreachable once a probe
times out, one that refuses connections at once; listeners hear each change; reasons
name no address."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from backends.s3 import S3Backend, S3Config
from gateway.service import backend_watch
from gateway.service.backend_watch import BackendWatch
from tests.support.server import free_port


class _Handler(http.server.BaseHTTPRequestHandler):
    """Holds every request until ``answering`` is set, then answers 403 (an answer)."""

    answering = threading.Event()

    def do_GET(self) -> None:
        self.answering.wait(30)
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def silent() -> Iterator[tuple[str, threading.Event]]:
    """A real HTTP server that answers nothing until its event is set."""
    event = threading.Event()
    handler = type("Handler", (_Handler,), {"answering": event})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", event
    event.set()
    server.shutdown()
    server.server_close()
    thread.join()


def store(endpoint: str) -> S3Backend:
    return S3Backend(S3Config(endpoint=endpoint, access_key="a", secret_key="b", retries=1,
                              connect_timeout=2, read_timeout=60))


@pytest.mark.timeout(60)
async def test_a_store_that_never_answers_is_unreachable_until_it_does(
        silent: tuple[str, threading.Event], monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint, answering = silent
    monkeypatch.setattr(backend_watch, "MIN_PROBE_TIMEOUT_S", 0.5)
    backend = store(endpoint)
    watch = BackendWatch(backend, interval_s=0.1)
    heard: list[bool] = []
    watch.listeners.append(heard.append)
    try:
        problem = await watch.check()  # read_timeout is 60 s: the watch's own deadline
        assert problem is not None and "did not answer" in problem
        assert watch.status()["reachable"] is False and heard == [False]
        answering.set()
        assert await watch.check() is None
        assert watch.status()["reachable"] is True and heard == [False, True]
        assert await watch.check() is None and heard == [False, True]  # no change
    finally:
        await backend.aclose()


@pytest.mark.timeout(60)
async def test_a_refused_connection_is_reported_without_the_address() -> None:
    port = free_port()  # nothing listens there
    backend = store(f"http://127.0.0.1:{port}")
    watch = BackendWatch(backend, interval_s=1.0)
    try:
        problem = await watch.check()
        assert problem == "The upstream service cannot be reached."
        assert str(port) not in watch.status()["reason"]
    finally:
        await backend.aclose()
