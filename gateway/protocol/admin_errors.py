"""Errors of the admin routes (``/_squall/*``) in Squall's JSON shape,
``{"error": Code, "message": text}``, instead of the framework's ``{"detail": ...}``.

An admin route answers an error as :func:`admin_error` renders it: the code and status
come from the one table of S3 errors (:func:`gateway.protocol.errors.s3_error_for`), and
for the few errors only the admin routes have, from :data:`_ADMIN` below.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.protocol.errors import (
    InvalidArgument,
    MethodNotAllowed,
    ProtocolError,
    S3ErrorSpec,
    s3_error_for,
)


class NoSuchAdminRoute(ProtocolError):
    """No such admin route."""


class NoSuchEntity(ProtocolError):
    """The user does not exist."""


class EntityAlreadyExists(ProtocolError):
    """The user already exists."""


class NoSuchUser(ProtocolError):
    """No user has this name."""


#: the errors only the admin routes answer (everything else: the S3 table)
_ADMIN: dict[type[BaseException], S3ErrorSpec] = {
    NoSuchAdminRoute: S3ErrorSpec("NotFound", 404),
    NoSuchEntity: S3ErrorSpec("NoSuchEntity", 404),
    EntityAlreadyExists: S3ErrorSpec("EntityAlreadyExists", 409),
    NoSuchUser: S3ErrorSpec("NoSuchUser", 404),
}


def admin_error_for(exc: BaseException) -> tuple[S3ErrorSpec, str]:
    """The code/status and message of ``exc`` on the admin routes."""
    spec = _ADMIN.get(type(exc))
    if spec is not None and isinstance(exc, ProtocolError):
        return spec, exc.message
    return s3_error_for(exc)


def admin_error(exc: BaseException, *,
                headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The admin routes' JSON answer to ``exc``."""
    spec, message = admin_error_for(exc)
    return JSONResponse({"error": spec.code, "message": message}, status_code=spec.status,
                        headers=headers)


async def http_error(request: Request, exc: Exception) -> Response:
    """An unknown admin path (404), a method it does not serve (405), other HTTP errors."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    headers = getattr(exc, "headers", None)
    if status == 404:
        return admin_error(NoSuchAdminRoute(f"no such admin route: {request.url.path}"),
                           headers=headers)
    if status == 405:
        return admin_error(MethodNotAllowed(f"{request.method} is not allowed on "
                                            f"{request.url.path}"), headers=headers)
    message = str(getattr(exc, "detail", "")) or "error"
    return JSONResponse({"error": "InvalidRequest", "message": message}, status_code=status,
                        headers=headers)


async def validation_error(request: Request, exc: Exception) -> Response:
    """A missing or malformed query parameter: 400 InvalidArgument naming it."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or e['loc'][0]}: "
                         f"{e['msg']}" for e in errors) or "invalid request"
    return admin_error(InvalidArgument(problems))


#: ``FastAPI(exception_handlers=HANDLERS)``
HANDLERS: dict[int | type[Exception], Callable[[Request, Any], Coroutine[Any, Any, Response]]] = {
    HTTPException: http_error, RequestValidationError: validation_error}
