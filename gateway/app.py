"""The composition root: builds every component from Settings and wires the ASGI app."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from backends.base import Backend
from backends.registry import BackendOptions, create_backend
from gateway.credentials import Credentials
from gateway.metrics import Metrics
from gateway.s3api.endpoint import S3Endpoint
from gateway.service import ObjectService
from gateway.settings import Settings

log = logging.getLogger("squall")


@dataclass
class Components:
    """Everything one gateway process runs, built once from settings."""

    settings: Settings
    credentials: Credentials
    backend: Backend
    service: ObjectService
    metrics: Metrics
    started: float = field(default_factory=time.time)
    ready: bool = False

    def status(self) -> dict[str, Any]:
        spec = self.settings.backend_spec
        return {
            "ready": self.ready,
            "uptime_s": round(time.time() - self.started, 3),
            "backend": {"kind": spec.kind, "args": spec.args},
            "durability": self.settings.durability,
        }


def build_components(settings: Settings, credentials: Credentials) -> Components:
    spec = settings.backend_spec
    backend = create_backend(spec.kind, spec.args, BackendOptions(
        data_dir=settings.data_dir, durability=settings.durability,
        min_part_size=settings.min_part_size))
    return Components(settings=settings, credentials=credentials, backend=backend,
                      service=ObjectService(backend), metrics=Metrics())


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
        response = await self._endpoint(Request(scope, receive, send))
        await response(scope, receive, send)


def build_app(components: Components) -> S3Dispatcher:
    """The ASGI application: ``/_squall/*`` admin routes, then the whole S3 namespace."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        components.ready = True
        try:
            yield
        finally:
            components.ready = False
            await components.backend.aclose()

    app = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/_squall/health")
    async def health() -> JSONResponse:
        ok = components.ready
        return JSONResponse({"status": "ok" if ok else "starting"}, status_code=200 if ok
                            else 503)

    @app.get("/_squall/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(components.metrics.render(),
                                 media_type="text/plain; version=0.0.4")

    @app.get("/_squall/status")
    async def status() -> JSONResponse:
        return JSONResponse(components.status())

    creds = components.credentials
    endpoint = S3Endpoint(
        components.service,
        secret_for=lambda key: creds.secret_key if key == creds.access_key else None,
        domain=components.settings.domain, metrics=components.metrics)
    return S3Dispatcher(app, endpoint)
