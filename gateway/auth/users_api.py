"""``/_squall/users``: the admin's API for users (signed by the admin's key pair).

``GET`` lists them (no secrets); ``POST ?name=NAME`` adds one and answers its key pair
once; ``DELETE ?name=NAME`` removes one, whose key is refused from then on; ``PUT
?name=NAME[&max_requests=N][&max_rate=R][&max_bandwidth=B]`` gives one its own fair-share
limits (those not given: the gateway's settings; none given: the settings for all).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.requests import Request
from starlette.types import Scope

from backends.core.units import parse_rate
from gateway.auth import admin
from gateway.auth.users import (
    NoSuchUser,
    UserDirectory,
    UserError,
    UserExists,
    UserLimits,
    new_user,
)
from gateway.protocol.admin_errors import EntityAlreadyExists, NoSuchEntity, admin_error
from gateway.protocol.errors import InvalidArgument

PATH = "/_squall/users"


def register_routes(app: FastAPI, users: UserDirectory,
                    authenticate: Callable[[Scope], str]) -> None:
    """Add the routes; ``authenticate(scope)`` returns the signer's access key or raises
    StorageError."""

    def refusal(request: Request) -> JSONResponse | None:
        return admin.refusal(request, authenticate, admin_key=users.admin.access_key,
                             what="manage users")

    @app.get(PATH)
    async def list_users(request: Request) -> JSONResponse:
        if (error := refusal(request)) is not None:
            return error
        return JSONResponse({"users": [u.public() for u in users.users()]})

    @app.post(PATH)
    async def add_user(request: Request, name: str) -> JSONResponse:
        if (error := refusal(request)) is not None:
            return error
        try:
            user = await asyncio.to_thread(lambda: users.add(new_user(name)))
        except UserError as exc:
            return _invalid(exc)
        return JSONResponse({"user": {**user.public(), "secret_key": user.secret_key}})

    @app.put(PATH)
    async def set_limits(request: Request, name: str, max_requests: int | None = None,
                         max_rate: float | None = None,
                         max_bandwidth: str | None = None) -> JSONResponse:
        if (error := refusal(request)) is not None:
            return error
        try:
            limits = UserLimits(max_requests=max_requests, max_rate=max_rate,
                                max_bandwidth=bandwidth_of(max_bandwidth))
            user = await asyncio.to_thread(users.set_limits, name, limits)
        except UserError as exc:
            return _invalid(exc)
        return JSONResponse({"user": user.public()})

    @app.delete(PATH)
    async def remove_user(request: Request, name: str) -> JSONResponse:
        if (error := refusal(request)) is not None:
            return error
        try:
            gone = await asyncio.to_thread(users.remove, name)
        except UserError as exc:
            return _invalid(exc)
        return JSONResponse({"removed": gone.public()})


def bandwidth_of(text: str | None) -> float | None:
    """Bytes per second from ``10MiB/s``, ``1000000`` or ``0`` (none); UserError if bad."""
    if text is None:
        return None
    if text.strip() in ("0", "0/s"):
        return 0.0
    try:
        return parse_rate(text)
    except ValueError as exc:
        raise UserError(f"max_bandwidth: {exc}") from None


def _invalid(exc: UserError) -> JSONResponse:
    kind = NoSuchEntity if isinstance(exc, NoSuchUser) else \
        EntityAlreadyExists if isinstance(exc, UserExists) else InvalidArgument
    return admin_error(kind(str(exc)))
