"""The S3 endpoint: target parsing, authentication, routing, and the one error mapping."""

from __future__ import annotations

import functools
import itertools
import logging
import secrets
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from backends.core.errors import StorageError
from gateway.auth.access import AccessControl, request_origin
from gateway.auth.bucket_access import S3_DEFAULTS, NewBucketDefaults
from gateway.auth.users import User, UserDirectory
from gateway.client.sigv4 import DEFAULT_REGION
from gateway.metrics import Metrics
from gateway.protocol.errors import (
    AccessDenied,
    InvalidRequest,
    ProtocolError,
    is_internal,
    s3_error_for,
)
from gateway.protocol.responses import error_headers, error_response
from gateway.protocol.targets import Target, parse_target
from gateway.qos.gate import ClassGate, request_bytes
from gateway.qos.model import user_class
from gateway.qos.shares import FairShares
from gateway.s3api.access_log import ACCESS_LOG, claimed_access_key, log_request
from gateway.s3api.context import S3Request
from gateway.s3api.handlers import acl as acl_handlers
from gateway.s3api.handlers import (
    attributes,
    buckets,
    cors,
    lifecycle,
    multipart,
    objects,
    policy,
    post_object,
    tagging,
)
from gateway.s3api.routing import route
from gateway.s3api.sigv2 import authenticate_v2, is_sigv2
from gateway.s3api.sigv4 import (
    AuthContext,
    PayloadMode,
    authenticate,
    parse_payload_mode,
)
from gateway.service.objects import ObjectService

log = logging.getLogger("squall.s3")

Handler = Callable[[S3Request], Awaitable[Response]]
HANDLERS: dict[str, Handler] = {**buckets.HANDLERS, **objects.HANDLERS, **multipart.HANDLERS,
                                **cors.HANDLERS, **tagging.HANDLERS, **lifecycle.HANDLERS,
                                **attributes.HANDLERS, **policy.HANDLERS,
                                **acl_handlers.HANDLERS}
# The context of an unsigned CORS preflight (its handler reads no body).
ANONYMOUS = AuthContext(access_key="", region="", amz_date="", scope="", signing_key=b"",
                        seed_signature="", payload_mode=PayloadMode.UNSIGNED,
                        payload_sha256=None, presigned=False)


def _nobody(access_key: str) -> User | None:
    return None


# What marks a signed request: anything else is anonymous (docs/security.md).
_SIGNATURE_PARAMS = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature",
                     "AWSAccessKeyId", "Signature")


def is_unsigned(headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
    """No Authorization header and no presigned query: an anonymous request (a request
    with a bad signature is not one)."""
    return "authorization" not in headers and not any(p in query for p in _SIGNATURE_PARAMS)


def anonymous_context(headers: Mapping[str, str], region: str) -> AuthContext:
    """The context of an anonymous request: its body is checked against
    ``x-amz-content-sha256`` when sent, and cannot carry chunk signatures."""
    mode, sha256 = PayloadMode.UNSIGNED, None
    declared = headers.get("x-amz-content-sha256")
    if declared is not None:
        mode, sha256 = parse_payload_mode(declared)
        if mode.signed_chunks:
            raise AccessDenied("Signed chunks need a signed request.")
    return AuthContext(access_key="", region=region, amz_date="", scope="", signing_key=b"",
                       seed_signature="", payload_mode=mode, payload_sha256=sha256,
                       presigned=False)


#: scope key: the access key whose fair share a request holds until its response is sent
SHARE_KEY = "squall.share"


def _has_body(headers: dict[str, str]) -> bool:
    return headers.get("content-length", "0") not in ("0", "") or "transfer-encoding" in headers


class S3Endpoint:
    """Starlette endpoint serving the whole S3 namespace."""

    def __init__(self, service: ObjectService, *, secret_for: Callable[[str], str | None],
                 domain: str | None, metrics: Metrics,
                 user_for: Callable[[str], User | None] | None = None, sigv2: bool = True,
                 region: str = DEFAULT_REGION,
                 qos_gates: Mapping[str, ClassGate] | None = None,
                 users: UserDirectory | None = None,
                 new_buckets: NewBucketDefaults = S3_DEFAULTS,
                 shares: FairShares | None = None) -> None:
        self._service = service
        self._shares = shares
        # Owners, ACLs and policies are enforced when the endpoint knows the users.
        self._access = AccessControl(service, users, new_buckets=new_buckets) \
            if users is not None else None
        # QoS classes by bucket (docs/qos.md), kept current by their controller: a bucket
        # without a class costs one dict lookup per request.
        self._qos_gates: Mapping[str, ClassGate] = qos_gates if qos_gates is not None else {}
        self._secret_for = secret_for
        self._user_for = user_for if user_for is not None else _nobody
        self._domain = domain.lower() if domain else None
        self._sigv2 = sigv2
        self._region = region
        self._metrics = metrics
        self._handlers: dict[str, Handler] = {
            **HANDLERS, "PostObject": functools.partial(
                post_object.post_object,
                keys=post_object.FormKeys(secret_for=secret_for, user_for=self._user_for))}
        # Request ids: unique per process start, cheap to make (no syscall per request).
        self._id_prefix = secrets.token_hex(4).upper()
        self._request_numbers = itertools.count(1)

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI: answer the request, then give back the fair share it held."""
        response = await self(Request(scope, receive, send))
        try:
            await response(scope, receive, send)
        finally:
            key = scope.get(SHARE_KEY)
            if key is not None and self._shares is not None:
                self._shares.leave(key)

    async def __call__(self, request: Request) -> Response:
        """The response to ``request``; a request admitted to its user's fair share
        holds it (``scope[SHARE_KEY]``) until :meth:`serve` has sent the response."""
        started = time.perf_counter()
        scope = request.scope
        request_id = f"{self._id_prefix}{next(self._request_numbers):08X}"
        operation = "Unknown"
        resource = scope["path"]
        query: dict[str, str] = {}
        auth: AuthContext | None = None
        error_code = ""  # the S3 error answered, for the access log
        pairs = [(n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in scope["headers"]]
        headers: dict[str, str] = {}
        for name, value in pairs:
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        try:
            # Target and route are found before authentication so that logs and metrics
            # name the operation of a request that fails to authenticate; their errors
            # wait for the authentication's (a stranger learns nothing from them).
            unroutable: ProtocolError | None = None
            try:
                target = parse_target(scope.get("raw_path") or scope["path"].encode(),
                                      headers.get("host", ""), self._domain)
            except ProtocolError as exc:
                target, unroutable = Target("", ""), exc
            resource = f"/{target.bucket}/{target.key}" if target.key else f"/{target.bucket}"
            query_string = scope["query_string"].decode("latin-1")
            query = dict(urllib.parse.parse_qsl(query_string, keep_blank_values=True))
            if unroutable is None:
                try:
                    operation = route(request.method, target.level, query, headers)
                except ProtocolError as exc:
                    unroutable = exc
            # A CORS preflight is never signed: browsers send it on their own. A browser
            # upload signs its form, which its handler checks (and authorizes).
            preflight = request.method == "OPTIONS"
            form = operation == "PostObject" and unroutable is None
            unsigned = not preflight and (form or self._access is not None) \
                and is_unsigned(headers, query)
            if preflight:
                auth = ANONYMOUS
            elif unsigned:
                auth = anonymous_context(headers, self._region)
            else:
                auth = self.authenticate(scope, pairs)
            if unroutable is not None:
                # An anonymous caller learns nothing of what this gateway implements.
                raise AccessDenied() if unsigned else unroutable
            user = None if preflight or unsigned else self._user_for(auth.access_key)
            if self._shares is not None and not preflight:
                self._shares.enter(auth.access_key, user, request_bytes(headers))
                scope[SHARE_KEY] = auth.access_key
            req = S3Request(request, operation, target.bucket, target.key, query, headers,
                            auth, request_id, self._service, user, self._access)
            if self._access is not None and (user is None or not user.admin) and not form:
                source_ip, secure = request_origin(scope)
                req.bucket_access = await self._access.authorize(
                    user, operation, target.bucket, target.key, query=query,
                    headers=headers, source_ip=source_ip, secure=secure)
            if self._access is not None and ("x-amz-expected-bucket-owner" in headers or
                                             "x-amz-source-expected-bucket-owner" in headers):
                await self._access.check_expected_owners(operation, target.bucket, headers,
                                                         req.bucket_access)
            if self._qos_gates:
                response = await self._paced(req)
            else:
                response = await self._handlers[operation](req)
        except StorageError as exc:
            response, error_code = self._error(exc, request, resource, request_id, operation)
        except Exception as exc:
            log.exception("request %s (%s %s) failed", request_id, request.method, resource)
            response, error_code = self._error(exc, request, resource, request_id, operation)
        if "origin" in headers and operation != "PreflightRequest":
            # The rule is chosen by the method the page declares, if it declares one.
            method = headers.get("access-control-request-method", request.method)
            response.headers.update(await self._cors_headers(resource, headers, method))
        if response.status_code >= 300 and _has_body(headers):
            # The body may not have been read; the connection cannot be reused safely.
            response.headers["connection"] = "close"
        if self._shares is not None and request.method == "GET" \
                and response.status_code < 300 and auth is not None:
            length = response.headers.get("content-length")
            if length is not None and length.isdigit():
                self._shares.charge(auth.access_key, int(length))
        response.headers["x-amz-request-id"] = request_id
        response.headers["x-amz-id-2"] = request_id
        response.headers["server"] = "Squall"
        elapsed = time.perf_counter() - started
        self._metrics.observe_request(operation, response.status_code, elapsed)
        if ACCESS_LOG.isEnabledFor(logging.INFO):
            log_request(request_id=request_id, operation=operation, method=request.method,
                        resource=resource, response=response,
                        error_code=error_code,
                        access_key=auth.access_key if auth is not None else
                        claimed_access_key(headers, query),
                        request_headers=headers, seconds=elapsed)
        return response

    async def _paced(self, req: S3Request) -> Response:
        """Run ``req`` at the pace of its QoS classes: its bucket's and its user's."""
        gates = self._qos_gates
        chosen = [gate for gate in (gates.get(req.bucket), gates.get(user_class(req.user.name))
                                    if req.user is not None else None) if gate is not None]
        for gate in chosen:
            await gate.admit(req.headers)
        response = await self._handlers[req.operation](req)
        for gate in chosen:
            gate.charge_response(req.request.method, response)
        return response

    async def _cors_headers(self, resource: str, headers: dict[str, str],
                            method: str) -> dict[str, str]:
        bucket = resource.lstrip("/").partition("/")[0]
        try:
            return await cors.response_headers(self._service, bucket, headers, method)
        except StorageError:  # no such bucket, unreadable rules: no CORS headers
            return {}

    async def authorize_bucket(self, scope: Scope, access_key: str, operation: str,
                               bucket: str) -> None:
        """Raise AccessDenied (NoSuchBucket for a bucket that does not exist) unless the
        user of ``access_key`` may do ``operation`` on ``bucket``, as an S3 request of
        that operation would be decided (for the admin routes about one bucket)."""
        user = self._user_for(access_key)
        if self._access is None or (user is not None and user.admin):
            return
        source_ip, secure = request_origin(scope)
        await self._access.authorize(user, operation, bucket, "", query={}, headers={},
                                     source_ip=source_ip, secure=secure)

    def authenticate(self, scope: Scope,
                     pairs: list[tuple[str, str]] | None = None) -> AuthContext:
        """Verify the request's SigV4 signature (header or presigned) with our keys, or
        its SigV2 one unless SigV2 is disabled."""
        if pairs is None:
            pairs = [(n.decode("latin-1").lower(), v.decode("latin-1"))
                     for n, v in scope["headers"]]
        raw_path = (scope.get("raw_path") or b"/").decode("latin-1")
        query = scope["query_string"].decode("latin-1")
        hmap: dict[str, list[str]] = {}
        for name, value in pairs:
            hmap.setdefault(name, []).append(value)
        if is_sigv2(hmap, query):
            if not self._sigv2:
                raise InvalidRequest("Signature Version 2 is disabled on this server "
                                     "(--no-sigv2); please use AWS4-HMAC-SHA256.")
            return authenticate_v2(method=scope["method"], raw_path=raw_path, query=query,
                                   headers=hmap, virtual_bucket=self._virtual_bucket(hmap),
                                   secret_for=self._secret_for, now=time.time(),
                                   region=self._region)
        return authenticate(method=scope["method"], raw_path=raw_path, query=query,
                            headers=pairs, secret_for=self._secret_for, now=time.time())

    def _virtual_bucket(self, headers: dict[str, list[str]]) -> str | None:
        host = headers.get("host", [""])[0]
        if self._domain is None or host.startswith("["):
            return None
        host = host.rsplit(":", 1)[0].lower()
        return host[: -len(self._domain) - 1] if host.endswith("." + self._domain) else None

    def _error(self, exc: BaseException, request: Request, resource: str,
               request_id: str, operation: str) -> tuple[Response, str]:
        """The S3 error response for ``exc`` and its error code (counted, recorded)."""
        spec, message = s3_error_for(exc)
        if spec.code == "SlowDown":
            self._metrics.count_slowdown()
        if isinstance(exc, StorageError) and is_internal(exc, spec):
            # The client reads S3's words; the detail (paths, causes) is logged here.
            log.log(logging.INFO if spec.code == "SlowDown" else logging.WARNING,
                    "request %s (%s %s) answered %s: %s", request_id, operation, resource,
                    spec.code, exc.message or type(exc).__name__)
        self._metrics.record_error(operation, resource, spec.code, spec.status)
        return error_response(spec, message, resource=resource, request_id=request_id,
                              head=request.method == "HEAD",
                              extra=error_headers(exc, spec)), spec.code
