"""Errors of the admin routes (``/_squall/*``) in Squall's JSON shape,
``{"error": Code, "message": text}``, instead of the framework's ``{"detail": ...}``."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

_CODES = {404: "NotFound", 405: "MethodNotAllowed"}


async def http_error(request: Request, exc: Exception) -> Response:
    """An unknown admin path (404), a method it does not serve (405), other HTTP errors."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 404:
        message = f"no such admin route: {request.url.path}"
    elif status == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = str(getattr(exc, "detail", "")) or "error"
    headers = getattr(exc, "headers", None)
    return JSONResponse({"error": _CODES.get(status, "InvalidRequest"), "message": message},
                        status_code=status, headers=headers)


async def validation_error(request: Request, exc: Exception) -> Response:
    """A missing or malformed query parameter: 400 InvalidArgument naming it."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or e['loc'][0]}: "
                         f"{e['msg']}" for e in errors) or "invalid request"
    return JSONResponse({"error": "InvalidArgument", "message": problems}, status_code=400)


#: ``FastAPI(exception_handlers=HANDLERS)``
HANDLERS: dict[int | type[Exception], Callable[[Request, Any], Coroutine[Any, Any, Response]]] = {
    HTTPException: http_error, RequestValidationError: validation_error}
