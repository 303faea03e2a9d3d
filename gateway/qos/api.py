"""The signed admin API ``/_squall/qos`` (docs/qos.md, "Admin API").

* ``GET /_squall/qos[?bucket=B]``: the classes and their state (as in ``/_squall/status``);
* ``PUT /_squall/qos?bucket=B&g0_bandwidth=10MB/s[&g0_iops=N&max_gear=K&threshold=T
  &device_threshold=U&demote_after=K&credit_s=S]``: set B's class (the bucket must exist);
* ``DELETE /_squall/qos?bucket=B``: remove it (204, also when B had none, as S3's
  ``DeleteBucket*`` configuration calls).

Signed like S3 requests (SigV4, the gateway's credentials); the class travels in the
query string, which the signature covers. Errors are JSON ``{"error", "message"}`` with
the S3 code and status: 400 InvalidArgument, 403 for bad signatures, 404 NoSuchBucket.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.requests import Request

from backends.errors import StorageError
from gateway.qos.controller import QosController
from gateway.qos.model import QosClass
from gateway.s3api.errors import s3_error_for
from gateway.service import ObjectService

Denied = Callable[[Request], JSONResponse | None]


def _invalid(message: str) -> JSONResponse:
    return JSONResponse({"error": "InvalidArgument", "message": message}, status_code=400)


def validation_message(exc: ValidationError) -> str:
    """One line naming each bad field."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "class"
        message = str(error["msg"]).removeprefix("Value error, ")
        parts.append(f"{field}: {message}")
    return "; ".join(parts)


def register_routes(app: FastAPI, qos: QosController, service: ObjectService,
                    denied: Denied) -> None:
    """Add the ``/_squall/qos`` routes to the admin app."""

    async def checked(request: Request, bucket: str | None) -> JSONResponse | None:
        if (error := denied(request)) is not None:
            return error
        if not bucket:
            return _invalid("the bucket query parameter is required")
        try:
            await service.head_bucket(bucket)
        except StorageError as exc:
            spec, message = s3_error_for(exc)
            return JSONResponse({"error": spec.code, "message": message},
                                status_code=spec.status)
        return None

    @app.get("/_squall/qos")
    async def show_qos(request: Request, bucket: str | None = None) -> JSONResponse:
        if (error := denied(request)) is not None:
            return error
        status = qos.status()
        if bucket is not None:
            status["buckets"] = {k: v for k, v in status["buckets"].items() if k == bucket}
        return JSONResponse(status)

    @app.put("/_squall/qos")
    async def set_qos(request: Request, bucket: str | None = None) -> JSONResponse:
        if (error := await checked(request, bucket)) is not None:
            return error
        assert bucket is not None
        fields = {k: v for k, v in request.query_params.items() if k != "bucket"}
        try:
            spec = QosClass.model_validate(fields)
        except ValidationError as exc:
            return _invalid(validation_message(exc))
        await qos.set(bucket, spec)
        return JSONResponse({"bucket": bucket, **qos.describe(bucket)})

    @app.delete("/_squall/qos")
    async def clear_qos(request: Request, bucket: str | None = None) -> Response:
        if (error := await checked(request, bucket)) is not None:
            return error
        assert bucket is not None
        await qos.clear(bucket)
        return Response(status_code=204)
