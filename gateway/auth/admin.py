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


class Refused(Exception):
    """A caller an admin route refuses; answered with ``response`` (see :func:`refused`)."""

    def __init__(self, response: JSONResponse) -> None:
        super().__init__(response.status_code)
        self.response = response


def caller_check(authenticate: Callable[[Scope], str], *, admin_key: str | None = None,
                 what: str = "call this") -> Callable[[Request], None]:
    """A route dependency (``dependencies=[Depends(caller_check(...))]``) that refuses
    the caller as :func:`refusal` does. Dependencies run before the route's parameters
    are read: a caller who may not call the route learns nothing of what it takes (403
    before any 400)."""

    def check(request: Request) -> None:
        error = refusal(request, authenticate, admin_key=admin_key, what=what)
        if error is not None:
            raise Refused(error)

    return check


async def refused(request: Request, exc: Exception) -> JSONResponse:
    """The exception handler of :class:`Refused`."""
    assert isinstance(exc, Refused)
    return exc.response
