"""The ASGI application: admin routes under /_squall/ and the S3 namespace."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from backends.core.base import ElasticBackend
from backends.core.errors import ServiceUnavailable, StorageError
from gateway.auth import admin
from gateway.auth.bucket_access import NewBucketDefaults
from gateway.auth.status import TRUSTED, StatusGate, StatusGuard
from gateway.auth.users import UserDirectory, UserFile, admin_user
from gateway.auth.users_api import register_routes as register_user_routes
from gateway.cache.tier import CacheTier
from gateway.cluster.node import describe_single
from gateway.cluster.peerauth import HEADER_BYTES as PEER_HEADER
from gateway.components import Components
from gateway.dashboard.routes import mount_dashboard
from gateway.protocol import admin_errors
from gateway.protocol.admin_errors import admin_error, admin_error_for
from gateway.protocol.errors import InvalidArgument, InvalidRequest, NotImplementedOperation
from gateway.qos.api import register_routes as register_qos_routes
from gateway.s3api.endpoint import S3Endpoint

log = logging.getLogger("squall")


ADMIN_PREFIX = "/_squall/"


class S3Dispatcher:
    """The ASGI entry point: ``/_squall/*`` and lifespan go to the FastAPI admin app,
    every other HTTP request straight to the S3 endpoint (no per-request framework
    routing or middleware on the data path)."""

    def __init__(self, admin: FastAPI, endpoint: S3Endpoint) -> None:
        self.admin = admin
        self._endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(ADMIN_PREFIX):
            await self.admin(scope, receive, send)
            return
        await self._endpoint.serve(scope, receive, send)


def user_directory(components: Components) -> UserDirectory:
    """The users the gateway authenticates (ValueError if the users file is damaged)."""
    return UserDirectory(admin_user(components.credentials),
                         UserFile(components.settings.users_path))


def build_app(components: Components, users: UserDirectory | None = None) -> StatusGuard:
    """The ASGI application: ``/_squall/*`` admin routes, then the whole S3 namespace
    (behind the cluster layer when peers are configured); the status surface answers
    only requests its gate allows (``.gate``). The lifespan keeps ``users`` current;
    without a lifespan (workers), the caller runs ``users.watcher()``."""
    settings = components.settings
    users = users if users is not None else user_directory(components)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            await components.start()
        except ServiceUnavailable as exc:
            log.error("cannot start: %s", exc)
            raise
        watch = users.watcher()
        watch.start()
        try:
            yield
        finally:
            await watch.stop()
            await components.stop()

    app = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None,
                  exception_handlers=admin_errors.HANDLERS)

    @app.get("/_squall/health")
    async def health() -> JSONResponse:
        if not components.ready:
            return JSONResponse({"status": "starting"}, status_code=503)
        problem = await components.cache.check_health() if components.cache is not None \
            else None
        if problem is not None:
            return JSONResponse({"status": "unhealthy", "reason": problem}, status_code=503)
        reason = None
        if components.watch is not None and components.watch.problem is not None:
            reason = "backend unreachable: " + components.watch.problem
        elif components.cache is not None:
            reason = components.cache.degraded
        if reason is not None:
            return JSONResponse({"status": "degraded", "reason": reason}, status_code=503)
        return JSONResponse({"status": "ok"})

    @app.get("/_squall/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(components.metrics.render(),
                                 media_type="text/plain; version=0.0.4")

    @app.get("/_squall/status")
    async def status() -> JSONResponse:
        return JSONResponse(components.status())

    @app.get("/_squall/cluster")
    async def cluster() -> JSONResponse:  # with peers, the cluster layer answers instead
        return JSONResponse(describe_single())

    mount_dashboard(app, components)  # /_squall/ui: gated like /_squall/status

    endpoint = S3Endpoint(components.service, secret_for=users.secret_for,
                          user_for=users.user_for, users=users, domain=settings.domain,
                          metrics=components.metrics, sigv2=settings.sigv2,
                          region=settings.region, qos_gates=components.qos.gates,
                          new_buckets=NewBucketDefaults.from_settings(
                              settings.default_object_ownership,
                              settings.default_public_access_block),
                          shares=components.shares)

    def access_key(scope: Scope) -> str:
        return endpoint.authenticate(scope).access_key

    def not_admin(request: Request) -> JSONResponse | None:
        """The error response for a request not signed by the admin, else None."""
        return admin.refusal(request, access_key, admin_key=users.admin.access_key,
                             what="change the gateway's settings")

    def caller(admin_of: str | None = None) -> list[Any]:
        """The dependency of an admin route that checks its caller before its parameters:
        any user (signed), or with ``admin_of`` (what the route does), the admin."""
        return [Depends(admin.caller_check(
            access_key, admin_key=None if admin_of is None else users.admin.access_key,
            what=admin_of or "call this"))]

    app.add_exception_handler(admin.Refused, admin.refused)
    register_user_routes(app, users, access_key)  # /_squall/users
    register_qos_routes(app, components.qos, components.service, users, not_admin)  # /_squall/qos

    @app.post("/_squall/cluster/leave",
              dependencies=caller("make this member leave the cluster"))
    async def cluster_leave() -> JSONResponse:
        """Leave the cluster now (signed by the admin; a pod's preStop hook): hand the
        unflushed writes over, end the lease; the member then only forwards requests."""
        if components.cluster is None or components.cluster.etcd is None:
            return admin_error(InvalidRequest("this gateway has no coordinator "
                                              "(--coordinator): it cannot leave a cluster"))
        try:
            await components.cluster.leave()
        except StorageError as exc:
            return admin_error(exc)
        return JSONResponse(components.cluster.describe())

    @app.post("/_squall/sync", dependencies=caller())
    async def sync(request: Request, bucket: str | None = None) -> Response:
        """Flush everything dirty now (in ``bucket``, which the caller must be allowed to
        list: 403 AccessDenied otherwise, before anything is flushed); NDJSON progress,
        then the outcome. Signed like an S3 request (SigV4, same credentials)."""
        signer = access_key(request.scope)
        if bucket is not None and not request.scope.get(TRUSTED):
            try:
                await endpoint.authorize_bucket(request.scope, signer, "ListObjects", bucket)
            except StorageError as exc:
                return admin_error(exc)
        detail = request.scope.get(TRUSTED) or signer == users.admin.access_key
        return StreamingResponse(sync_progress(components.cache, bucket, detail=bool(detail)),
                                 media_type="application/x-ndjson")

    def elastic() -> ElasticBackend | JSONResponse:
        """The store with providers, or the error response (no such store)."""
        if not isinstance(components.store, ElasticBackend):
            return admin_error(NotImplementedOperation("The backend has no providers (use "
                                                       "blobseer_like)."))
        return components.store

    change_settings = caller("change the gateway's settings")

    @app.get("/_squall/providers", dependencies=change_settings)
    async def list_providers() -> JSONResponse:
        """The store's providers (signed like an S3 request)."""
        store = elastic()
        if isinstance(store, JSONResponse):
            return store
        return JSONResponse({"providers": [asdict(p) for p in store.providers()]})

    @app.post("/_squall/providers", dependencies=change_settings)
    async def add_provider(path: str, standby: bool = False) -> JSONResponse:
        """Add a provider directory to the running store (signed like an S3 request)."""
        store = elastic()
        if isinstance(store, JSONResponse):
            return store
        try:
            info = await store.add_provider(path, standby=standby)
        except ValueError as exc:
            return admin_error(InvalidArgument(str(exc)))
        return JSONResponse({"provider": asdict(info)})

    @app.post("/_squall/elastic/next-size", dependencies=change_settings)
    async def elastic_next_size(size: int) -> JSONResponse:
        """Size the next elastic volume ``size`` bytes, once (``squall calibrate``).
        Signed by the admin."""
        elastic = components.cache.elastic if components.cache is not None else None
        if elastic is None:
            return admin_error(InvalidRequest("this gateway does not run cache_mode=elastic"))
        if size <= 0:
            return admin_error(InvalidArgument("size must be a number of bytes > 0"))
        elastic.set_next_size(size)
        return JSONResponse({"next_size_bytes": size})

    gate = StatusGate(public=settings.public_status, token=settings.status_token,
                      authenticate=access_key, admin_key=users.admin.access_key)
    dispatcher = S3Dispatcher(app, endpoint)
    if components.cluster is None:
        return StatusGuard(dispatcher, gate)
    auth = components.cluster.auth

    def is_peer(scope: Scope) -> bool:  # members read each other's /_squall/cluster
        marker = next((v for n, v in scope["headers"] if n == PEER_HEADER), None)
        if marker is None:
            return False
        try:
            auth.verify(scope["method"], scope.get("raw_path") or b"", scope["query_string"],
                        marker.decode("latin-1"), once=False)
        except StorageError:
            return False
        return True

    return StatusGuard(components.cluster.asgi(dispatcher, domain=settings.domain), gate,
                       is_peer)


async def sync_progress(cache: CacheTier | None, bucket: str | None,
                        interval_s: float = 0.5, *, detail: bool = True) -> AsyncIterator[bytes]:
    """Lines ``{"done": B, "total": B}`` while flushing, then ``{"flushed": true}``;
    the objects the backend refuses are named only with ``detail`` (the admin: they may
    be other users')."""
    if cache is None:
        yield b'{"flushed": true, "done": 0, "total": 0}\n'
        return
    progress = {"done": 0, "total": 0}

    def report(done: int, total: int) -> None:
        progress.update(done=done, total=total)

    task = asyncio.ensure_future(cache.wait_flushed(bucket, report))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval_s)
            if done:
                break
            yield (json.dumps(progress) + "\n").encode()
        error = task.exception()
        if error is None and (refused := task.result()):
            yield (json.dumps({
                "flushed": False, "error": "Quarantined", **progress,
                "message": f"{len(refused)} object(s) the backend refuses; kept in the "
                           "cache and retried every few minutes",
                "quarantined": [q.describe() for q in refused[:100]] if detail else []})
                   + "\n").encode()
        elif error is None:
            yield (json.dumps({"flushed": True, **progress}) + "\n").encode()
        else:
            spec, message = admin_error_for(error)
            yield (json.dumps({"flushed": False, "error": spec.code, "message": message})
                   + "\n").encode()
    finally:
        task.cancel()
