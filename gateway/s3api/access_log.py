"""The access log: one line per S3 request on the ``squall.access`` logger.

Format (fields separated by one space, ``-`` where a field has no value)::

    <request id> <operation> <method> <path> <status> <error code> <access key id>
    <bytes in> <bytes out> <duration>ms

The path and the access key id come from the client, so they are percent-encoded: a
line never holds a space or a line break that the client chose. Callers check
``ACCESS_LOG.isEnabledFor(logging.INFO)`` first, so a disabled log costs nothing else.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Mapping

from starlette.responses import Response

ACCESS_LOG = logging.getLogger("squall.access")
_FORMAT = "%s %s %s %s %d %s %s %s %s %.1fms"
_MAX_KEY_ID = 128


def claimed_access_key(headers: Mapping[str, str], query: Mapping[str, str]) -> str:
    """The access key id a request names (SigV4 or SigV2, header or presigned), for a
    request that did not authenticate; "" when it names none."""
    authorization = headers.get("authorization", "")
    if "Credential=" in authorization:  # AWS4-HMAC-SHA256 Credential=<key>/<scope>, ...
        return authorization.partition("Credential=")[2].partition("/")[0]
    if authorization.startswith("AWS "):  # AWS <key>:<signature>
        return authorization[4:].rpartition(":")[0]
    credential = query.get("X-Amz-Credential")
    if credential is not None:
        return credential.partition("/")[0]
    return query.get("AWSAccessKeyId", "")


def log_request(*, request_id: str, operation: str, method: str, resource: str,
                response: Response, error_code: str, access_key: str,
                request_headers: Mapping[str, str], seconds: float) -> None:
    """Write the access-log line of one request. ``bytes in`` is the request's
    Content-Length (``-`` without one); ``bytes out`` the response body's length;
    ``seconds`` runs until the response is ready to send."""
    key = urllib.parse.quote(access_key[:_MAX_KEY_ID], safe="") if access_key else "-"
    bytes_out = "0" if method == "HEAD" else response.headers.get("content-length", "-")
    ACCESS_LOG.info(_FORMAT, request_id, operation, method,
                    urllib.parse.quote(resource, safe="/"), response.status_code,
                    error_code or "-", key, request_headers.get("content-length", "-"),
                    bytes_out, seconds * 1000)
