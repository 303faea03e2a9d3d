"""The cluster's ASGI layer in front of the S3 dispatcher.

* ``/_squall/peer/*`` goes to the peer protocol, ``/_squall/cluster`` to the ring view.
* An object-level request for a key another member owns is streamed to that member and
  its answer streamed back: method, raw path, query and headers (``Host`` and
  ``Authorization`` included) unchanged, the body as it arrives, nothing buffered. The
  owner checks the client's own signature; a peer header marks the request as forwarded
  so the owner serves it without forwarding it again.
* A request carrying a peer header is served here only if the header verifies; a client
  cannot make a member serve a key it does not own.
* A member removed by a live membership change forwards every client request to the
  members that remain: an object request to its key's owner, any other to a member
  chosen by the bucket's name.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from backends.errors import StorageError
from gateway.cluster.bodyseal import unseal
from gateway.cluster.membership import Membership
from gateway.cluster.peer_api import PATH_PREFIX, PeerAPI, request_body
from gateway.cluster.peerauth import HEADER_BYTES, PeerAuth, marker_ring
from gateway.cluster.placement import Placement
from gateway.cluster.ring import owner_index
from gateway.cluster.transport import PeerTransport
from gateway.s3api.endpoint import object_target, parse_target
from gateway.s3api.errors import InternalError, s3_error_for
from gateway.s3api.responses import error_response

log = logging.getLogger("squall.cluster")
CLUSTER_PATH = "/_squall/cluster"
ADMIN_PREFIX = "/_squall/"

# Hop-by-hop headers (RFC 9110 7.6.1) and Expect: the owner's framing is its own.
_REQUEST_DROP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te",
                           b"trailer", b"upgrade", b"expect", b"transfer-encoding",
                           HEADER_BYTES})
_RESPONSE_DROP = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"trailer",
                            b"upgrade", b"date"})


class ClusterGateway:
    """ASGI: peer protocol, ring view, forwarding; everything else goes to ``inner``."""

    def __init__(self, inner: ASGIApp, *, ring: Placement, auth: PeerAuth,
                 transport: PeerTransport, peer_api: PeerAPI,
                 describe: Callable[[], dict[str, Any]], domain: str | None,
                 registry: CollectorRegistry | None = None,
                 membership: Membership | None = None) -> None:
        self._inner = inner
        self._membership = membership
        self._ring = ring
        self._auth = auth
        self._transport = transport
        self._peer_api = peer_api
        self._describe = describe
        self._domain = domain.lower() if domain else None
        self._ids = itertools.count(1)
        self._id_prefix = "C" + secrets.token_hex(3).upper()
        self._forwarded = Counter("squall_cluster_forwarded_requests",
                                  "S3 requests streamed to the key's owner", ["node"],
                                  registry=registry) if registry is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._inner(scope, receive, send)
            return
        path: str = scope["path"]
        membership = self._membership
        if membership is not None and membership.pending_id is not None:
            await self._hold_new_list(scope, membership)
        if path.startswith(ADMIN_PREFIX):
            if path.startswith(PATH_PREFIX):
                await self._peer_api(scope, receive, send)
            elif path == CLUSTER_PATH and scope["method"] in ("GET", "HEAD"):
                await JSONResponse(self._describe())(scope, receive, send)
            else:
                await self._inner(scope, receive, send)
            return
        marker = next((v for n, v in scope["headers"] if n == HEADER_BYTES), None)
        if marker is not None:
            await self._serve_forwarded(scope, receive, send, marker)
            return
        if membership is None:
            await self._serve(scope, receive, send)
            return
        if membership.successors:  # this member was removed: the others serve
            await self._forward(scope, receive, send, self._successor(scope, membership))
            return
        if not membership.gate.is_set():  # the member list is changing
            try:
                await membership.wait_open()
            except StorageError as exc:
                await self._error(scope, receive, send, exc)
                return
        membership.serving += 1
        try:
            await self._serve(scope, receive, send)
        finally:
            membership.serving -= 1

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        owner = self._owner(scope)
        if owner is None:
            await self._inner(scope, receive, send)
        else:
            await self._forward(scope, receive, send, owner)

    @staticmethod
    async def _hold_new_list(scope: Scope, membership: Membership) -> None:
        """A peer request signed for the member list being committed waits until this
        member has committed it too (instead of a ring mismatch)."""
        marker = next((v for n, v in scope["headers"] if n == HEADER_BYTES), None)
        pending = membership.pending_id
        if marker is not None and pending is not None and not scope["path"].endswith(
                "/membership") and marker_ring(marker.decode("latin-1")) == pending:
            await membership.wait_committed(pending)

    def _owner(self, scope: Scope) -> int | None:
        """The member owning the request's key, None for this node or no key."""
        if len(self._ring.members) == 1:
            return None
        target = self._target(scope)
        if target is None:
            return None
        owner = self._ring.owner(*target)
        return None if owner == self._ring.self_index else owner

    def _successor(self, scope: Scope, membership: Membership) -> int:
        """A removed member: who of the remaining members serves the request (by the
        ring, without health: a key whose owner is down is refused by this way)."""
        try:
            target = parse_target(*self._where(scope), self._domain)
        except StorageError:  # the member picked for "" answers with the right error
            return owner_index(membership.successors, "", "")
        return owner_index(membership.successors, target.bucket or "", target.key or "")

    def _target(self, scope: Scope) -> tuple[str, str] | None:
        """The request's bucket and key; None for other requests."""
        return object_target(*self._where(scope), self._domain)

    @staticmethod
    def _where(scope: Scope) -> tuple[bytes, str]:
        """The request's raw path and Host header."""
        host = next((v.decode("latin-1") for n, v in scope["headers"] if n == b"host"), "")
        return scope.get("raw_path") or scope["path"].encode(), host

    async def _serve_forwarded(self, scope: Scope, receive: Receive, send: Send,
                               marker: bytes) -> None:
        try:
            value = marker.decode("latin-1")
            self._auth.verify(scope["method"], scope.get("raw_path") or b"",
                              scope["query_string"], value, once=False)
            scope, receive = unseal(scope, receive, self._auth.body_key(value))
        except StorageError as exc:
            await self._error(scope, receive, send, exc)
            return
        headers = [(n, v) for n, v in scope["headers"] if n != HEADER_BYTES]
        await self._inner({**scope, "headers": headers}, receive, send)

    async def _forward(self, scope: Scope, receive: Receive, send: Send, owner: int) -> None:
        headers = [(n, v) for n, v in scope["headers"] if n not in _REQUEST_DROP]
        length = next((v for n, v in scope["headers"] if n == b"content-length"), None)
        chunked = any(n == b"transfer-encoding" for n, _ in scope["headers"])
        content = None
        if chunked:  # sent on chunked too (no content-length)
            headers = [(n, v) for n, v in headers if n != b"content-length"]
            content = request_body(receive)
        elif length not in (None, b"0"):
            content = request_body(receive)
        try:
            response = await self._transport.open(
                owner, scope["method"], scope.get("raw_path") or scope["path"].encode(),
                scope["query_string"], headers=headers, content=content)
        except StorageError as exc:
            await self._error(scope, receive, send, exc)
            return
        except Exception:
            log.exception("forwarding %s %s to member %d failed", scope["method"],
                          scope["path"], owner)
            await self._error(scope, receive, send, InternalError())
            return
        if self._forwarded is not None:
            self._forwarded.labels(str(owner)).inc()
        try:
            out = [(n.lower(), v) for n, v in response.headers]
            closing = any(n == b"connection" and v.lower() == b"close" for n, v in out)
            out = [(n, v) for n, v in out if n not in _RESPONSE_DROP]
            if closing:
                out.append((b"connection", b"close"))
            await send({"type": "http.response.start", "status": response.status,
                        "headers": out})
            async for chunk in self._transport.body(owner, response):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()

    async def _error(self, scope: Scope, receive: Receive, send: Send,
                     exc: StorageError) -> None:
        spec, message = s3_error_for(exc)
        request_id = f"{self._id_prefix}{next(self._ids):08X}"
        log.warning("request %s %s %s: %s", request_id, scope["method"], scope["path"],
                    message)
        response = error_response(spec, message, resource=scope["path"],
                                  request_id=request_id, head=scope["method"] == "HEAD",
                                  extra={"connection": "close", "x-amz-request-id": request_id,
                                         "server": "Squall"})
        await response(scope, receive, send)
