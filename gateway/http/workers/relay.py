"""Peer requests from other hosts passed to the worker they are signed for.

With ``--peers`` and ``--workers N`` (docs/workers.md, "Clusters of workers"), another
host's member sends a request to this host's port signed for one of its workers (the
peer marker names it). The kernel gives the connection to any worker: with hand-over the
connection moves to the addressed worker (``handover.py``); where it cannot (TLS, a
failed send, hand-over off), the receiving worker passes the request here, byte for
byte, marker and sealed body included, over the addressed worker's Unix socket, and its
answer back.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence

import aiohttp
from starlette.types import Receive, Scope, Send
from yarl import URL

from backends.core.errors import ServiceUnavailable
from gateway.cluster.peer_api import request_body
from gateway.http.workers.links import ERRORS, HOP_BY_HOP, describe
from gateway.protocol.errors import s3_error_for
from gateway.protocol.responses import error_response

log = logging.getLogger("squall.workers")

_RESPONSE_DROP = frozenset({b"connection", b"keep-alive", b"transfer-encoding",
                            b"trailer", b"upgrade", b"date"})
#: as long as a peer call may wait (the cluster transport's read timeout)
READ_TIMEOUT_S = 600.0
CONNECTIONS_PER_WORKER = 128


class WorkerRelay:
    """Keep-alive connections to this host's workers for the requests passed to them."""

    def __init__(self, paths: Sequence[str]) -> None:
        self._paths = list(paths)
        self._sessions: dict[int, aiohttp.ClientSession] = {}
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=5.0,
                                              sock_read=READ_TIMEOUT_S)

    def _session(self, worker: int) -> aiohttp.ClientSession:
        session = self._sessions.get(worker)
        if session is None:  # made on the event loop, at first use
            session = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=self._paths[worker],
                                                limit=CONNECTIONS_PER_WORKER),
                auto_decompress=False, timeout=self._timeout,
                skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent",
                                   "Content-Type"))
            self._sessions[worker] = session
        return session

    async def __call__(self, worker: int, scope: Scope, receive: Receive, send: Send
                       ) -> None:
        """Send the request to ``worker`` unchanged and stream its answer back; 503 if
        the worker cannot be reached (the sender's request was not served)."""
        target = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        raw = scope["headers"]
        headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in raw
                   if n not in HOP_BY_HOP]
        chunked = any(n == b"transfer-encoding" for n, _ in raw)
        length = next((v for n, v in raw if n == b"content-length"), None)
        body = request_body(receive) if chunked or length not in (None, b"0") else None
        try:
            response = await self._session(worker).request(
                scope["method"], URL(f"http://worker-{worker}{target}", encoded=True),
                headers=headers, data=body, allow_redirects=False, compress=None)
        except ERRORS as exc:
            await self._unavailable(worker, describe(exc), scope, receive, send)
            return
        try:
            out = [(n.lower(), v) for n, v in response.raw_headers
                   if n.lower() not in _RESPONSE_DROP]
            await send({"type": "http.response.start", "status": response.status,
                        "headers": out})
            while chunk := await response.content.readany():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            response.release()

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()

    @staticmethod
    async def _unavailable(worker: int, cause: str, scope: Scope, receive: Receive,
                           send: Send) -> None:
        """S3's 503 with Retry-After (the answer goes back to the client through the
        sending member); the cause goes to the log."""
        refused = ServiceUnavailable()
        spec, message = s3_error_for(refused)
        request_id = secrets.token_hex(8).upper()
        log.warning("request %s %s %s: worker %d of this member is unavailable (%s)",
                    request_id, scope["method"], scope["path"], worker, cause)
        await error_response(spec, message, resource=scope["path"], request_id=request_id,
                             head=scope["method"] == "HEAD",
                             extra={"connection": "close", "server": "Squall",
                                    "x-amz-request-id": request_id,
                                    "retry-after": str(refused.retry_after)})(
            scope, receive, send)
