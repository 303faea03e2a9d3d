"""The cluster's ASGI layer in front of the S3 dispatcher.

* ``/_squall/peer/*`` goes to the peer protocol, ``/_squall/cluster`` to the ring view.
* An object-level request for a key another member owns (in this member's view) is
  streamed to that member and its answer streamed back: method, raw path, query and
  headers (``Host`` and ``Authorization`` included) unchanged, the body as it arrives,
  nothing buffered. The owner checks the client's own signature; a peer header marks the
  request as forwarded, signed under the forwarding member's view.
* A forwarded request is served here once this member has caught up with the sender's
  view, if it owns the key then; a member with a newer view forwards it on (a few hops
  at most: views only move forward).
* A request this member serves itself gets 503 SlowDown, whatever its handler answered,
  if this member's lease could have expired by the time the answer starts (fencing:
  docs/cluster.md): an answer is never sent by a member that another may have replaced.
* A member that is not in the view (it left, or lost its lease and is registering again)
  forwards every object request to its key's owner.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Callable
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backends.core.errors import ServiceUnavailable, SlowDown, StorageError
from gateway.cluster.bodyseal import has_body, unseal
from gateway.cluster.peer_api import PATH_PREFIX, PeerAPI, request_body
from gateway.cluster.peerauth import HEADER_BYTES, PeerAuth
from gateway.cluster.transport import PeerTransport
from gateway.cluster.view import Member, Membership
from gateway.protocol.errors import InternalError, s3_error_for
from gateway.protocol.responses import error_response
from gateway.protocol.targets import object_target, parse_target

log = logging.getLogger("squall.cluster")
CLUSTER_PATH = "/_squall/cluster"
ADMIN_PREFIX = "/_squall/"
HOPS = b"x-squall-hops"
MAX_HOPS = 3
RETRY_AFTER_S = 1

# Hop-by-hop headers (RFC 9110 7.6.1) and Expect: the owner's framing is its own.
REQUEST_DROP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te",
                           b"trailer", b"upgrade", b"expect", b"transfer-encoding",
                           HEADER_BYTES, HOPS})
_RESPONSE_DROP = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"trailer",
                            b"upgrade", b"date"})


class ClusterGateway:
    """ASGI: peer protocol, ring view, forwarding; everything else goes to ``inner``."""

    def __init__(self, inner: ASGIApp, *, membership: Membership, auth: PeerAuth,
                 transport: PeerTransport, peer_api: PeerAPI,
                 describe: Callable[[], dict[str, Any]], domain: str | None,
                 on_forward: Callable[[str], None] | None = None) -> None:
        self._inner = inner
        self._membership = membership
        self._auth = auth
        self._transport = transport
        self._peer_api = peer_api
        self._describe = describe
        self._domain = domain.lower() if domain else None
        self._ids = itertools.count(1)
        self._id_prefix = "C" + secrets.token_hex(3).upper()
        self._on_forward = on_forward  # counts requests streamed to an owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._inner(scope, receive, send)
            return
        path: str = scope["path"]
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
        else:
            await self._serve(scope, receive, send, 0)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, hops: int) -> None:
        target = self._target(scope)
        view = self._membership.view
        if target is None:  # bucket- and service-level requests: served here
            bucket = self._bucket(scope)
            if view.mine or not bucket or not view.members or hops >= MAX_HOPS:
                await self._inner(scope, receive, send)
            else:  # a member that left: one that has not serves its bucket requests
                owner = view.owner(bucket, "")
                assert owner is not None
                await self._forward(scope, receive, send, view.members[owner], hops + 1)
            return
        owner = view.owner(*target)
        if owner is None:
            await self._error(scope, receive, send, ServiceUnavailable(
                "no cluster member runs the worker this key belongs to"))
        elif owner == view.me:
            await self._inner(scope, receive, self._fenced(scope, receive, send))
        elif hops >= MAX_HOPS:
            await self._error(scope, receive, send, SlowDown(
                "the cluster's members disagree on this key's owner (its membership is "
                "changing); retry", retry_after=RETRY_AFTER_S))
        else:
            await self._forward(scope, receive, send, view.members[owner], hops + 1)

    def _fenced(self, scope: Scope, receive: Receive, send: Send) -> Send:
        """``send`` that answers 503 SlowDown instead of the handler's answer when this
        member may no longer serve as the answer starts (its lease: see the module)."""
        refused = False

        async def guarded(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and not self._membership.serving():
                refused = True
                await self._error(scope, receive, send, SlowDown(
                    "this cluster member cannot renew its lease in etcd: it may no longer "
                    "own this key, so the request was not acknowledged; retry",
                    retry_after=RETRY_AFTER_S))
            elif not refused:
                await send(message)
        return guarded

    def _target(self, scope: Scope) -> tuple[str, str] | None:
        """The request's bucket and key; None for other requests."""
        return object_target(*self._where(scope), self._domain)

    def _bucket(self, scope: Scope) -> str:
        """The request's bucket ("" for a service-level or malformed request)."""
        try:
            return parse_target(*self._where(scope), self._domain).bucket
        except StorageError:
            return ""

    @staticmethod
    def _where(scope: Scope) -> tuple[bytes, str]:
        """The request's raw path and Host header."""
        host = next((v.decode("latin-1") for n, v in scope["headers"] if n == b"host"), "")
        return scope.get("raw_path") or scope["path"].encode(), host

    async def _serve_forwarded(self, scope: Scope, receive: Receive, send: Send,
                               marker: bytes) -> None:
        try:
            value = marker.decode("latin-1")
            signed = self._auth.verify(scope["method"], scope.get("raw_path") or b"",
                                       scope["query_string"], value, once=False)
            await self._membership.catch_up(signed.view)
            if has_body(scope["headers"]):  # the tag's key: an HMAC, only for a body
                scope, receive = unseal(scope, receive, self._auth.body_key(value))
        except StorageError as exc:
            await self._error(scope, receive, send, exc)
            return
        hops = next((int(v) for n, v in scope["headers"] if n == HOPS and v.isdigit()), 1)
        headers = [(n, v) for n, v in scope["headers"] if n not in (HEADER_BYTES, HOPS)]
        await self._serve({**scope, "headers": headers}, receive, send, hops)

    async def _forward(self, scope: Scope, receive: Receive, send: Send, owner: Member,
                       hops: int) -> None:
        headers = [(n, v) for n, v in scope["headers"] if n not in REQUEST_DROP]
        headers.append((HOPS, str(hops).encode()))
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
                scope["query_string"], view=self._membership.view.token, headers=headers,
                content=content)
        except StorageError as exc:
            await self._error(scope, receive, send, exc)
            return
        except Exception:
            log.exception("forwarding %s %s to member %s failed", scope["method"],
                          scope["path"], owner.name)
            await self._error(scope, receive, send, InternalError())
            return
        if self._on_forward is not None:
            self._on_forward(owner.name)
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
                    exc.message or message)  # the detail: the client reads S3's words
        extra = {"connection": "close", "x-amz-request-id": request_id, "server": "Squall"}
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            extra["retry-after"] = str(retry_after)
        response = error_response(spec, message, resource=scope["path"],
                                  request_id=request_id, head=scope["method"] == "HEAD",
                                  extra=extra)
        await response(scope, receive, send)
