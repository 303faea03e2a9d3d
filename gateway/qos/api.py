"""The signed admin API ``/_squall/qos`` (docs/qos.md, "Admin API").

* ``GET /_squall/qos[?bucket=B|?user=U]``: the classes and their state (as in
  ``/_squall/status``);
* ``PUT /_squall/qos?bucket=B&g0_bandwidth=10MB/s[&g0_iops=N&max_gear=K&threshold=T
  &device_threshold=U&demote_after=K&credit_s=S]``: set B's class (the bucket must exist);
  ``?user=U&...`` sets the class of user U's requests (the user must exist);
* ``DELETE /_squall/qos?bucket=B`` (or ``?user=U``): remove it (204, also when there was
  none, as S3's ``DeleteBucket*`` configuration calls).

Signed like S3 requests (SigV4, the gateway's credentials); the class travels in the
query string, which the signature covers. Errors are JSON ``{"error", "message"}`` with
the S3 code and status: 400 InvalidArgument, 403 for bad signatures, 404 NoSuchBucket
or NoSuchUser.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.requests import Request

from backends.core.errors import StorageError
from gateway.auth.users import UserDirectory
from gateway.protocol.admin_errors import NoSuchUser, admin_error
from gateway.protocol.errors import InvalidArgument
from gateway.qos.controller import QosController
from gateway.qos.model import QosClass, user_class
from gateway.service.objects import ObjectService

Denied = Callable[[Request], JSONResponse | None]
SUBJECTS = ("bucket", "user")  # the query parameters naming a class


def _invalid(message: str) -> JSONResponse:
    return admin_error(InvalidArgument(message))


def validation_message(exc: ValidationError) -> str:
    """One line naming each bad field."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "class"
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{field}: {message}")
    return "; ".join(parts)


def register_routes(app: FastAPI, qos: QosController, service: ObjectService,
                    users: UserDirectory, denied: Denied) -> None:
    """Add the ``/_squall/qos`` routes to the admin app."""

    async def class_name(request: Request) -> str | JSONResponse:
        """The class a PUT or DELETE names (``?bucket=`` or ``?user=``), or the error."""
        if (error := denied(request)) is not None:
            return error
        given = {k: v for k, v in request.query_params.items() if k in SUBJECTS}
        if len(given) != 1 or not next(iter(given.values())):
            return _invalid("exactly one of the bucket and user query parameters is required")
        (kind, name), = given.items()
        if kind == "user":
            if all(user.name != name for user in users.users()):
                return admin_error(NoSuchUser(f"no user is named {name!r}"))
            return user_class(name)
        try:
            await service.head_bucket(name)
        except StorageError as exc:
            return admin_error(exc)
        return name

    @app.get("/_squall/qos")
    async def show_qos(request: Request, bucket: str | None = None,
                       user: str | None = None) -> JSONResponse:
        if (error := denied(request)) is not None:
            return error
        status = qos.status()
        if bucket is not None or user is not None:
            status["buckets"] = {k: v for k, v in status["buckets"].items() if k == bucket}
            status["users"] = {k: v for k, v in status["users"].items() if k == user}
        return JSONResponse(status)

    @app.put("/_squall/qos")
    async def set_qos(request: Request) -> JSONResponse:
        name = await class_name(request)
        if isinstance(name, JSONResponse):
            return name
        fields = {k: v for k, v in request.query_params.items() if k not in SUBJECTS}
        try:
            spec = QosClass.model_validate(fields)
        except ValidationError as exc:
            return _invalid(validation_message(exc))
        await qos.set(name, spec)
        subject = {k: v for k, v in request.query_params.items() if k in SUBJECTS}
        return JSONResponse({**subject, **qos.describe(name)})

    @app.delete("/_squall/qos")
    async def clear_qos(request: Request) -> Response:
        name = await class_name(request)
        if isinstance(name, JSONResponse):
            return name
        await qos.clear(name)
        return Response(status_code=204)
