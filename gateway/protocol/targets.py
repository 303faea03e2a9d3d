"""The target of a request: its bucket and key, from a path-style or virtual-hosted-style
request, and the level (service, bucket, object) it addresses."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from enum import Enum

from backends.core.errors import StorageError
from gateway.protocol.errors import InvalidArgument, InvalidRequest


class Level(Enum):
    SERVICE = "service"
    BUCKET = "bucket"
    OBJECT = "object"


@dataclass(frozen=True, slots=True)
class Target:
    bucket: str
    key: str

    @property
    def level(self) -> Level:
        if not self.bucket:
            return Level.SERVICE
        return Level.OBJECT if self.key else Level.BUCKET


def parse_target(raw_path: bytes, host: str, domain: str | None) -> Target:
    """Bucket and key from a path-style or virtual-hosted-style request."""
    try:
        path = urllib.parse.unquote(raw_path.decode("ascii"), errors="strict")
    except UnicodeError:
        raise InvalidArgument("The request path is not valid UTF-8.") from None
    if not path.startswith("/"):
        raise InvalidRequest("The request path must start with '/'.")
    host = host.rsplit(":", 1)[0].lower() if host and not host.startswith("[") else host
    if domain and host.endswith("." + domain):
        return Target(host[: -len(domain) - 1], path[1:])
    bucket, _, key = path[1:].partition("/")
    return Target(bucket, key)


def object_target(raw_path: bytes, host: str, domain: str | None) -> tuple[str, str] | None:
    """Bucket and key of an object-level request; None for a bucket- or service-level
    request, or one :func:`parse_target` refuses (the endpoint answers that one)."""
    try:
        target = parse_target(raw_path, host, domain)
    except StorageError:
        return None
    if not target.bucket or not target.key:
        return None
    return target.bucket, target.key
