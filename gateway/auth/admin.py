"""Who may call the signed admin routes under ``/_squall/`` (docs/security.md)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.responses import JSONResponse
from starlette.requests import Request
from starlette.types import Scope

from backends.core.errors import StorageError
from gateway.protocol.admin_errors import admin_error
from gateway.protocol.errors import AccessDenied


def refusal(request: Request, authenticate: Callable[[Scope], str], *,
            admin_key: str | None = None, what: str = "call this") -> JSONResponse | None:
    """The error response for ``request``, else None: unsigned or badly signed (the S3
    error), or, with ``admin_key``, signed by another user (403 AccessDenied).
    ``authenticate(scope)`` returns the signer's access key or raises StorageError."""
    try:
        access_key = authenticate(request.scope)
    except StorageError as exc:
        return admin_error(exc)
    if admin_key is not None and access_key != admin_key:
        return admin_error(AccessDenied(f"Only the admin may {what}."))
    return None
