"""Typed, protocol-neutral storage errors.

Every layer raises these; the S3 API maps each class to an S3 error code and HTTP
status in exactly one table (``gateway.protocol.errors``), the FUSE client maps them to
errno values. Nothing ever matches on message text.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base of every error Squall raises on purpose."""

    def __init__(self, message: str = "", *, resource: str = "") -> None:
        super().__init__(message or self.__class__.__doc__ or self.__class__.__name__)
        self.message = message or (self.__class__.__doc__ or "").strip()
        self.resource = resource


class NoSuchBucket(StorageError):
    """The specified bucket does not exist."""

    def __init__(self, bucket: str) -> None:
        super().__init__(resource=bucket)
        self.bucket = bucket


class BucketAlreadyOwnedByYou(StorageError):
    """Your previous request to create the named bucket succeeded and you already own it."""

    def __init__(self, bucket: str) -> None:
        super().__init__(resource=bucket)
        self.bucket = bucket


class BucketNotEmpty(StorageError):
    """The bucket you tried to delete is not empty."""

    def __init__(self, bucket: str) -> None:
        super().__init__(resource=bucket)
        self.bucket = bucket


class InvalidBucketName(StorageError):
    """The specified bucket is not valid."""


class NoSuchKey(StorageError):
    """The specified key does not exist."""

    def __init__(self, bucket: str, key: str) -> None:
        super().__init__(resource=f"{bucket}/{key}")
        self.bucket = bucket
        self.key = key


class NoSuchVersion(StorageError):
    """The specified version does not exist."""

    def __init__(self, bucket: str, key: str, version_id: str) -> None:
        super().__init__(resource=f"{bucket}/{key}")
        self.bucket = bucket
        self.key = key
        self.version_id = version_id


class InvalidVersionId(StorageError):
    """Invalid version id specified."""


class InvalidKey(StorageError):
    """The specified key is not valid."""


class KeyTooLong(StorageError):
    """Your key is too long."""


class NoSuchUpload(StorageError):
    """The specified multipart upload does not exist."""

    def __init__(self, upload_id: str) -> None:
        super().__init__(resource=upload_id)
        self.upload_id = upload_id


class InvalidPart(StorageError):
    """One or more of the specified parts could not be found or its entity tag did not match."""


class InvalidPartOrder(StorageError):
    """The list of parts was not in ascending order."""


class EntityTooSmall(StorageError):
    """Your proposed upload is smaller than the minimum allowed object size."""


class EntityTooLarge(StorageError):
    """Your proposed upload exceeds the maximum allowed object size."""


class IncompleteBody(StorageError):
    """You did not provide the number of bytes specified by the Content-Length HTTP header."""


class BadDigest(StorageError):
    """The Content-MD5 or checksum you specified did not match what was received."""


class InvalidDigest(StorageError):
    """The Content-MD5 or checksum you specified is not valid."""


class PreconditionFailed(StorageError):
    """At least one of the preconditions you specified did not hold."""


class InvalidRange(StorageError):
    """The requested range is not satisfiable."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size


class ConditionalRequestConflict(StorageError):
    """A conflicting operation occurred on the object; retry the request."""


class SlowDown(StorageError):
    """Please reduce your request rate."""

    def __init__(self, message: str = "", *, retry_after: int = 1,
                 public: bool = False) -> None:
        """``public``: the message is meant for the client (else it gets S3's text and
        the message goes to the log only)."""
        super().__init__(message)
        self.retry_after = retry_after
        self.public = public


class ServiceUnavailable(StorageError):
    """The service is unavailable; please retry."""

    def __init__(self, message: str = "", *, resource: str = "", retry_after: int = 1,
                 public: bool = False) -> None:
        """``public``: the message is meant for the client (see :class:`SlowDown`)."""
        super().__init__(message, resource=resource)
        self.retry_after = retry_after
        self.public = public


class BackendError(StorageError):
    """The backend failed to complete the operation."""


class NotImplementedByBackend(StorageError):
    """A capability the request needs is not provided by the configured backend."""


class InvalidRequestForObject(StorageError):
    """The request is not valid for this object (S3's InvalidRequest)."""


class InvalidWriteOffset(StorageError):
    """The write offset value that you specified does not match the current object size."""

    def __init__(self, message: str = "", *, size: int | None = None) -> None:
        super().__init__(message)
        self.size = size
