"""Storage errors at the S3 client edge, and the one table from error to errno.

``translate`` turns botocore exceptions into the typed errors of :mod:`backends.core.errors`
(plus the wire-only access errors of :mod:`gateway.protocol.errors`) and logs each failure
with S3's code, message and request id; ``describe`` gives that line for an error raised
from one; ``errno_for`` maps any exception to the errno a FUSE call returns.

The writes of a file (:data:`FILE_WRITES`) are logged here at debug level only: the open
file reports its failure once, with S3's message (one line per file, however many
requests and calls fail after it).
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from backends.core import errors as se
from backends.core.errors import StorageError
from gateway.protocol import errors as pe

log = logging.getLogger(__name__)


class EndpointUnreachable(se.ServiceUnavailable):
    """The S3 endpoint could not be reached."""


class UploadFailed(StorageError):
    """An earlier upload of this open file failed; its data was not stored."""


#: requests that store a file's data: their failures are the file's to report
FILE_WRITES = frozenset({"PutObject", "CreateMultipartUpload", "UploadPart", "UploadPartCopy",
                         "CompleteMultipartUpload"})


# S3 error code -> typed error class (constructed without arguments where possible).
_BY_CODE: dict[str, type[StorageError]] = {
    "NoSuchKey": se.NoSuchKey,
    "NoSuchBucket": se.NoSuchBucket,
    "NoSuchUpload": se.NoSuchUpload,
    "InvalidPart": se.InvalidPart,
    "InvalidPartOrder": se.InvalidPartOrder,
    "EntityTooSmall": se.EntityTooSmall,
    "EntityTooLarge": se.EntityTooLarge,
    "KeyTooLongError": se.KeyTooLong,
    "PreconditionFailed": se.PreconditionFailed,
    "InvalidRange": se.InvalidRange,
    "SlowDown": se.SlowDown,
    "ServiceUnavailable": se.ServiceUnavailable,
    "AccessDenied": pe.AccessDenied,
    "InvalidAccessKeyId": pe.InvalidAccessKeyId,
    "SignatureDoesNotMatch": pe.SignatureDoesNotMatch,
    "InvalidArgument": pe.InvalidArgument,
}

# HEAD responses have no body: only the status tells what happened.
_BY_STATUS: dict[int, type[StorageError]] = {
    403: pe.AccessDenied,
    404: se.NoSuchKey,
    412: se.PreconditionFailed,
    416: se.InvalidRange,
    503: se.SlowDown,
}

# First matching class (in order, by isinstance) decides the errno; anything else is EIO.
_ERRNO: tuple[tuple[type[BaseException], int], ...] = (
    (se.NoSuchKey, errno.ENOENT),
    (se.NoSuchBucket, errno.ENOENT),
    (pe.AccessDenied, errno.EACCES),
    (pe.InvalidAccessKeyId, errno.EACCES),
    (pe.SignatureDoesNotMatch, errno.EACCES),
    (se.SlowDown, errno.ENOSPC),
    (se.EntityTooLarge, errno.EFBIG),
    (se.KeyTooLong, errno.ENAMETOOLONG),
    (se.PreconditionFailed, errno.ESTALE),
)


def _build(cls: type[StorageError], bucket: str, key: str, message: str) -> StorageError:
    if cls is se.NoSuchKey:
        return se.NoSuchKey(bucket, key)
    if cls is se.NoSuchBucket:
        return se.NoSuchBucket(bucket)
    if cls is se.NoSuchUpload:
        return se.NoSuchUpload("")
    if cls is se.InvalidRange:
        return se.InvalidRange(0)
    return cls(message)


@contextmanager
def translate(operation: str, bucket: str, key: str = "", *,
              quiet: bool = False) -> Iterator[None]:
    """Raise our typed error ``from`` any botocore error raised inside the block;
    ``quiet``: the caller reports the error itself (logged at debug level only)."""
    try:
        yield
    except ClientError as exc:
        response = exc.response
        meta = response.get("ResponseMetadata", {})
        status = int(meta.get("HTTPStatusCode", 0))
        code = str(response.get("Error", {}).get("Code", ""))
        message = str(response.get("Error", {}).get("Message", ""))
        request_id = meta.get("RequestId") or meta.get("HTTPHeaders", {}).get(
            "x-amz-request-id", "-")
        cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or se.BackendError
        quiet = quiet or operation in FILE_WRITES or (
            cls is se.NoSuchKey and operation in ("HeadObject", "GetObject"))
        (log.debug if quiet else log.warning)(
            "%s %s/%s failed: %s %s: %s (request id %s)", operation, bucket, key, status,
            code or "-", message or "-", request_id)
        raise _build(cls, bucket, key, message or code) from exc
    except BotoCoreError as exc:
        (log.debug if quiet else log.warning)("%s %s/%s failed: %s", operation, bucket,
                                              key, exc)
        raise EndpointUnreachable(str(exc)) from exc


def describe(exc: BaseException) -> str:
    """One line for a log: S3's status, code, message and request id when the gateway
    refused a request, else the error's own message."""
    cause = exc.__cause__
    if isinstance(cause, ClientError):
        meta = cause.response.get("ResponseMetadata", {})
        error = cause.response.get("Error", {})
        request_id = meta.get("RequestId") or meta.get("HTTPHeaders", {}).get(
            "x-amz-request-id", "-")
        return (f"{meta.get('HTTPStatusCode', '-')} {error.get('Code') or '-'}: "
                f"{error.get('Message') or '-'} (request id {request_id})")
    if isinstance(exc, StorageError):
        return f"{type(exc).__name__}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


def errno_for(exc: BaseException) -> int:
    """The errno a FUSE operation returns for ``exc``. An :class:`UploadFailed` (every
    call after a failed upload) keeps the errno of the failure (``raise ... from``): a
    file whose upload met a full gateway keeps saying ENOSPC, not EIO."""
    if isinstance(exc, UploadFailed) and exc.__cause__ is not None:
        return errno_for(exc.__cause__)
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    for cls, number in _ERRNO:
        if isinstance(exc, cls):
            return number
    return errno.EIO
