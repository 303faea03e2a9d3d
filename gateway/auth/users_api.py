"""``/_squall/users``: the admin's API for users (signed by the admin's key pair).

``GET`` lists them (no secrets); ``POST ?name=NAME`` adds one and answers its key pair
once; ``DELETE ?name=NAME`` removes one, whose key is refused from then on; ``PUT
?name=NAME[&max_requests=N][&max_rate=R][&max_bandwidth=B]`` gives one its own fair-share
limits (those not given: the gateway's settings; none given: the settings for all).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse
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

    # The caller is checked before the parameters (docs/security.md).
    admin_only = [Depends(admin.caller_check(authenticate, admin_key=users.admin.access_key,
                                             what="manage users"))]

    @app.get(PATH, dependencies=admin_only)
    async def list_users() -> JSONResponse:
        return JSONResponse({"users": [u.public() for u in users.users()]})

    @app.post(PATH, dependencies=admin_only)
    async def add_user(name: str) -> JSONResponse:
        try:
            user = await asyncio.to_thread(lambda: users.add(new_user(name)))
        except UserError as exc:
            return _invalid(exc)
        return JSONResponse({"user": {**user.public(), "secret_key": user.secret_key}})

    @app.put(PATH, dependencies=admin_only)
    async def set_limits(name: str, max_requests: int | None = None,
                         max_rate: float | None = None,
                         max_bandwidth: str | None = None) -> JSONResponse:
        try:
            limits = UserLimits(max_requests=max_requests, max_rate=max_rate,
                                max_bandwidth=bandwidth_of(max_bandwidth))
            user = await asyncio.to_thread(users.set_limits, name, limits)
        except UserError as exc:
            return _invalid(exc)
        return JSONResponse({"user": user.public()})

    @app.delete(PATH, dependencies=admin_only)
    async def remove_user(name: str) -> JSONResponse:
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
