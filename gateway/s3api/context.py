"""What a handler gets: the parsed, authenticated S3 request."""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import ClientDisconnect, Request

from backends.core.errors import IncompleteBody
from backends.core.numbers import INT32_MAX, integer
from gateway.auth.users import User
from gateway.protocol.errors import InvalidArgument, MalformedXML
from gateway.s3api.body import RequestBody, request_body
from gateway.s3api.sigv4 import AuthContext
from gateway.service.objects import ObjectService

if TYPE_CHECKING:
    from gateway.auth.access import AccessControl
    from gateway.auth.bucket_access import BucketAccess

MAX_XML_BODY = 2 * 1024 * 1024


@dataclass(slots=True)
class S3Request:
    request: Request
    operation: str
    bucket: str
    key: str
    query: dict[str, str]
    headers: dict[str, str]  # lowercase names; repeated headers joined with ","
    auth: AuthContext
    request_id: str
    service: ObjectService
    user: User | None = None  # who signed it; None: unsigned (anonymous, a CORS preflight)
    access: AccessControl | None = None  # owners, ACLs, policies (None: not enforced)
    bucket_access: BucketAccess | None = None  # the bucket's settings, when already read

    @property
    def resource(self) -> str:
        return f"/{self.bucket}/{self.key}" if self.key else f"/{self.bucket}"

    def body(self, headers: Mapping[str, str] | None = None) -> RequestBody:
        """The verified request body (aws-chunked decoded, checksums checked at the end);
        ``headers`` replaces the request's headers for the checks."""
        return request_body(_raw_stream(self.request),
                            self.headers if headers is None else headers, self.auth)

    async def read_document(self, headers: Mapping[str, str] | None = None) -> bytes:
        """A small request document (XML), fully read and verified; bounded in size."""
        chunks: list[bytes] = []
        total = 0
        async for chunk in self.body(headers):
            total += len(chunk)
            if total > MAX_XML_BODY:
                raise MalformedXML("The XML document is too large.")
            chunks.append(chunk)
        return b"".join(chunks)

    def int_query(self, name: str, default: int, *, low: int = 0,
                  high: int | None = None) -> int:
        """The integer query parameter ``name`` (``default`` when absent or empty), at
        most ``high``; InvalidArgument when it is not a 32-bit integer or below ``low``."""
        raw = self.query.get(name)
        if raw is None or raw == "":
            return default
        value = integer(raw)
        if value is None or value > INT32_MAX:
            raise InvalidArgument(f"Provided {name} not an integer or within integer "
                                  "range")
        if value < low:
            raise InvalidArgument(f"Argument {name} must be an integer between {low} and "
                                  f"{high if high is not None else INT32_MAX}")
        return value if high is None else min(value, high)


def object_url(req: S3Request) -> str:
    """The absolute URL of the object ``req`` names, as the client addressed the gateway
    (path style, or virtual-hosted when the Host names the bucket)."""
    scheme = req.request.scope.get("scheme", "http")
    host = req.request.headers.get("host", "")
    path = urllib.parse.quote(req.key, safe="/~")
    if host.lower().startswith(f"{req.bucket.lower()}."):
        return f"{scheme}://{host}/{path}"
    return f"{scheme}://{host}/{req.bucket}/{path}"


async def _raw_stream(request: Request) -> AsyncIterator[bytes]:
    try:
        async for chunk in request.stream():
            if chunk:
                yield chunk
    except ClientDisconnect:
        raise IncompleteBody("The client closed the connection before sending the whole "
                             "body.") from None
