"""Access to the read-only status surface (docs/security.md, "Status access").

``/_squall/status``, ``/_squall/metrics``, ``/_squall/cluster`` and the dashboard's data
``/_squall/ui/data`` are served to anyone only with ``--public-status``; otherwise to a
request signed by any user (SigV4/SigV2, like an S3 request) or carrying
``Authorization: Bearer <status token>``. ``/_squall/health`` and the dashboard's page
and static files (no figures in them; the page asks for the token) stay open.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from backends.errors import StorageError
from gateway.s3api.errors import s3_error_for

STATUS_PATHS = frozenset({"/_squall/status", "/_squall/metrics", "/_squall/cluster",
                          "/_squall/ui/data"})
# Set on requests between the workers of one gateway (their private Unix sockets).
TRUSTED = "squall.trusted"


def is_status_path(path: str) -> bool:
    """Whether ``path`` is part of the gated status surface."""
    return path in STATUS_PATHS


class StatusGate:
    """Decides whether a request may read the status surface."""

    def __init__(self, *, public: bool, token: str | None,
                 authenticate: Callable[[Scope], object]) -> None:
        """``authenticate(scope)`` verifies a signature, raising StorageError if it
        cannot."""
        self._public = public
        self._token = token.encode() if token else None
        self._authenticate = authenticate

    def refusal(self, scope: Scope) -> Response | None:
        """None when the request may read, else the 403/400 answer to send."""
        if self._public or scope.get(TRUSTED):
            return None
        header = next((v for n, v in scope["headers"] if n == b"authorization"), None)
        if header is not None and header[:7].lower() == b"bearer ":
            if self._token is not None and hmac.compare_digest(header[7:].strip(), self._token):
                return None
            return _denied("AccessDenied", "The status token is not valid.", 403)
        try:
            self._authenticate(scope)
        except StorageError as exc:
            spec, message = s3_error_for(exc)
            return _denied(spec.code, message, spec.status)
        return None


def _denied(code: str, message: str, status: int) -> Response:
    return JSONResponse({"error": code, "message": message}, status_code=status)


class StatusGuard:
    """ASGI: refuses status requests ``gate`` does not allow; passes everything else
    (and requests signed by a cluster member, ``is_peer``) to ``inner`` unchanged."""

    def __init__(self, inner: ASGIApp, gate: StatusGate,
                 is_peer: Callable[[Scope], bool] | None = None) -> None:
        self.inner = inner
        self.gate = gate
        self._is_peer = is_peer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and is_status_path(scope["path"]) \
                and not (self._is_peer is not None and self._is_peer(scope)):
            refusal = self.gate.refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.inner(scope, receive, send)
