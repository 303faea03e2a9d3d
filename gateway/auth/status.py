"""Access to the read-only status surface (docs/security.md, "Status access").

``/_squall/status``, ``/_squall/metrics``, ``/_squall/cluster`` and the dashboard's data
``/_squall/ui/data`` name buckets, objects, users and paths: they are served to anyone
only with ``--public-status``; otherwise to a request signed by the admin (SigV4/SigV2,
like an S3 request) or carrying ``Authorization: Bearer <status token>``. Another user
gets ``403 AccessDenied``, except on ``/_squall/cluster``, where it gets the ring alone
(the members a client routes to, :func:`ring_only`). ``/_squall/health`` and the
dashboard's page and static files (no figures in them; the page asks for the token)
stay open.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backends.core.errors import StorageError
from gateway.protocol.admin_errors import admin_error
from gateway.protocol.errors import AccessDenied

STATUS_PATHS = frozenset({"/_squall/status", "/_squall/metrics", "/_squall/cluster",
                          "/_squall/ui/data"})
CLUSTER_PATH = "/_squall/cluster"
# Set on requests between the workers of one gateway (their private Unix sockets).
TRUSTED = "squall.trusted"
# Set on a user's (not the admin's) request for the cluster view: the ring alone.
RING_ONLY = "squall.ring_only"
#: what a user who is not the admin sees of ``/_squall/cluster``: enough to route
RING_FIELDS = ("format", "hash", "revision", "self", "serving", "members")
MEMBER_FIELDS = ("name", "url", "worker", "workers", "self", "state")


def is_status_path(path: str) -> bool:
    """Whether ``path`` is part of the gated status surface."""
    return path in STATUS_PATHS


class StatusGate:
    """Decides whether a request may read the status surface."""

    def __init__(self, *, public: bool, token: str | None,
                 authenticate: Callable[[Scope], str], admin_key: str) -> None:
        """``authenticate(scope)`` verifies a signature and returns the signer's access
        key, raising StorageError if it cannot; ``admin_key`` is the admin's."""
        self._public = public
        self._token = token.encode() if token else None
        self._authenticate = authenticate
        self._admin_key = admin_key

    def refusal(self, scope: Scope) -> Response | None:
        """None when the request may read (``scope[RING_ONLY]`` set when it may read
        the ring alone), else the 403/400 answer to send."""
        if self._public or scope.get(TRUSTED):
            return None
        header = next((v for n, v in scope["headers"] if n == b"authorization"), None)
        if header is not None and header[:7].lower() == b"bearer ":
            if self._token is not None and hmac.compare_digest(header[7:].strip(), self._token):
                return None
            return admin_error(AccessDenied("The status token is not valid."))
        try:
            access_key = self._authenticate(scope)
        except StorageError as exc:
            return admin_error(exc)
        if access_key == self._admin_key:
            return None
        if scope["path"] == CLUSTER_PATH:
            scope[RING_ONLY] = True
            return None
        return admin_error(AccessDenied("Only the admin (or the status token) may read the "
                                        "gateway's status."))

    async def serve(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        """Answer a status request with ``app`` if allowed, else with the refusal."""
        refusal = self.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
        elif scope.get(RING_ONLY):
            await app(scope, receive, ring_only(send))
        else:
            await app(scope, receive, send)


def ring_only(send: Send) -> Send:
    """``send`` for a cluster view whose JSON body keeps the ring alone (RING_FIELDS of
    it, MEMBER_FIELDS of each member); anything else passes unchanged."""
    start: Message | None = None
    body = bytearray()

    async def filtered(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
            return
        if message["type"] != "http.response.body" or start is None:
            await send(message)
            return
        body.extend(message.get("body", b""))
        if message.get("more_body", False):
            return
        out = bytes(body)
        if start["status"] == 200:
            try:
                out = json.dumps(_ring(json.loads(out))).encode()
            except (ValueError, TypeError, AttributeError):
                out = b"{}"
        headers = [(n, v) for n, v in start.get("headers", []) if n.lower() != b"content-length"]
        headers.append((b"content-length", str(len(out)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": out})

    return filtered


def _ring(view: dict[str, Any]) -> dict[str, Any]:
    ring = {k: view[k] for k in RING_FIELDS if k in view}
    ring["members"] = [{k: m[k] for k in MEMBER_FIELDS if k in m}
                       for m in view.get("members", [])]
    return ring


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
            await self.gate.serve(scope, receive, send, self.inner)
            return
        await self.inner(scope, receive, send)
