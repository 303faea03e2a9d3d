"""HTTP to every worker of this host over its Unix socket, for the admin views.

The S3 traffic between workers goes through the cluster transport (peer marker, ring);
these links carry only what one worker asks of all of them on behalf of a client
(health, status, metrics, ``squall sync``). The endpoints asked are the ones a gateway
serves to anybody (health, status, metrics) or check the client's own signature (sync).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp
from yarl import URL

ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)
#: request headers not passed from a client's request to a worker (the hop's own framing)
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"te", b"trailer", b"upgrade",
                        b"transfer-encoding", b"expect"})


@dataclass(frozen=True, slots=True)
class Answer:
    """A worker's answer, read whole; ``status`` 0 and ``error`` set if it could not be
    asked."""

    status: int
    body: bytes = b""
    error: str | None = None


class WorkerLinks:
    """Keep-alive connections to each worker's Unix socket (this worker's included)."""

    def __init__(self, paths: Sequence[str], *, timeout_s: float = 5.0) -> None:
        self._paths = list(paths)
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s,
                                              sock_read=timeout_s)
        self._sessions: dict[int, aiohttp.ClientSession] = {}

    @property
    def count(self) -> int:
        return len(self._paths)

    def session(self, worker: int) -> aiohttp.ClientSession:
        session = self._sessions.get(worker)
        if session is None:  # made on the event loop, at first use
            session = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=self._paths[worker], limit=8),
                auto_decompress=False, timeout=self._timeout,
                skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent",
                                   "Content-Type"))
            self._sessions[worker] = session
        return session

    @staticmethod
    def url(worker: int, target: str) -> URL:
        return URL(f"http://worker-{worker}{target}", encoded=True)

    async def get(self, worker: int, target: str, *, timeout_s: float | None = None) -> Answer:
        """GET ``target`` from ``worker``; never raises for an unreachable worker."""
        timeout = None if timeout_s is None else aiohttp.ClientTimeout(
            total=timeout_s)
        try:
            async with self.session(worker).get(self.url(worker, target),
                                                timeout=timeout) as response:
                return Answer(response.status, await response.read())
        except ERRORS as exc:
            return Answer(0, error=describe(exc))

    async def get_all(self, target: str, *, timeout_s: float | None = None) -> list[Answer]:
        return list(await asyncio.gather(*(self.get(w, target, timeout_s=timeout_s)
                                           for w in range(self.count))))

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()


def describe(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError | ConnectionRefusedError
                  | FileNotFoundError):
        return "not running (connection refused)"
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
