"""The one edge where upstream (botocore / aiohttp) exceptions become Squall's typed errors.

Errors are recognised by the S3 error code and the HTTP status, never by message text.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import aiohttp
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from backends.core import errors as e


@dataclass(frozen=True, slots=True)
class Target:
    """What a request was about, to build errors that name it (Squall's names)."""

    bucket: str = ""
    key: str = ""
    upload_id: str = ""


def _no_such_key(t: Target) -> e.StorageError:
    return e.NoSuchKey(t.bucket, t.key)


_BY_CODE: dict[str, Callable[[Target], e.StorageError]] = {
    "NoSuchKey": _no_such_key,
    "NoSuchBucket": lambda t: e.NoSuchBucket(t.bucket),
    "NoSuchUpload": lambda t: e.NoSuchUpload(t.upload_id),
    "InvalidPart": lambda t: e.InvalidPart(),
    "InvalidPartOrder": lambda t: e.InvalidPartOrder(),
    "EntityTooSmall": lambda t: e.EntityTooSmall(),
    "EntityTooLarge": lambda t: e.EntityTooLarge(),
    "PreconditionFailed": lambda t: e.PreconditionFailed(),
    "ConditionalRequestConflict": lambda t: e.ConditionalRequestConflict(),
    "BucketAlreadyOwnedByYou": lambda t: e.BucketAlreadyOwnedByYou(t.bucket),
    "BucketNotEmpty": lambda t: e.BucketNotEmpty(t.bucket),
    "InvalidBucketName": lambda t: e.InvalidBucketName(resource=t.bucket),
    "KeyTooLongError": lambda t: e.KeyTooLong(resource=f"{t.bucket}/{t.key}"),
    # MinIO: empty, "." or ".." path segments, segments over 255 bytes.
    "XMinioInvalidObjectName": lambda t: e.InvalidKey(
        "The upstream service cannot store this key.", resource=t.key),
    "XMinioInvalidResourceName": lambda t: e.InvalidKey(
        "The upstream service cannot store this key.", resource=t.key),
    "BadDigest": lambda t: e.BadDigest(),
    "InvalidDigest": lambda t: e.InvalidDigest(),
    "IncompleteBody": lambda t: e.IncompleteBody(),
    "InvalidRange": lambda t: e.InvalidRange(-1),  # size filled in by the caller
    "SlowDown": lambda t: e.SlowDown(),
    "ServiceUnavailable": lambda t: e.ServiceUnavailable(),
    "RequestTimeout": lambda t: e.ServiceUnavailable("The upstream request timed out."),
    "InternalError": lambda t: e.ServiceUnavailable("The upstream service failed."),
}

# Error codes that only come back as a bare HTTP status (HEAD responses carry no body).
_BY_STATUS: dict[int, Callable[[Target], e.StorageError]] = {
    404: lambda t: e.NoSuchKey(t.bucket, t.key) if t.key else e.NoSuchBucket(t.bucket),
    412: lambda t: e.PreconditionFailed(),
    416: lambda t: e.InvalidRange(-1),
    503: lambda t: e.SlowDown(),
}


def translate(exc: BaseException, target: Target) -> e.StorageError | None:
    """The typed error for a foreign exception, or None if it is not an upstream failure."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        make = _BY_CODE.get(code) or _BY_STATUS.get(status)
        if make is not None:
            return make(target)
        if status >= 500:
            return e.ServiceUnavailable(f"The upstream service failed ({code or status}).")
        return e.BackendError(f"The upstream service refused the request ({code or status}).",
                              resource=target.bucket)
    if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError, ConnectionClosedError,
                        aiohttp.ClientConnectionError)):
        return e.ServiceUnavailable("The upstream service cannot be reached.")
    if isinstance(exc, (ReadTimeoutError, asyncio.TimeoutError)):
        return e.ServiceUnavailable("The upstream service did not answer in time.")
    if isinstance(exc, (BotoCoreError, aiohttp.ClientError)):
        return e.BackendError("The request to the upstream service failed.")
    return None


@contextlib.contextmanager
def upstream(bucket: str = "", key: str = "", upload_id: str = "") -> Iterator[None]:
    """Raise the typed error for any upstream failure inside the block, ``from`` it."""
    try:
        yield
    except e.StorageError:
        raise
    except Exception as exc:
        typed = translate(exc, Target(bucket, key, upload_id))
        if typed is None:
            raise
        raise typed from exc


def error_code(exc: BaseException) -> str | None:
    """The upstream S3 error code behind a typed error raised by :func:`upstream`."""
    cause = exc.__cause__
    if isinstance(cause, ClientError):
        return str(cause.response.get("Error", {}).get("Code", "")) or None
    return None
