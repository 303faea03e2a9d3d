"""AWS Signature Version 2 verification: ``Authorization: AWS AKID:sig`` and presigned URLs
(``AWSAccessKeyId``, ``Signature``, ``Expires``), still what several clients sign with by
default (``s3cmd signurl``, the aws CLI v1's ``s3 presign``, boto3 with ``signature_version
's3'``).

The string to sign is S3's: method, Content-MD5, Content-Type, Date (Expires for a presigned
URL; empty when ``x-amz-date`` is sent), the canonical ``x-amz-*`` headers, and the resource:
``/bucket`` for virtual-hosted requests, the path as sent, and the sub-resources of
:data:`SUBRESOURCES` (sorted, values decoded). The signature is base64(HMAC-SHA1). The
clock rules are SigV4's: 15 minutes of skew, presigned URLs valid at most a week.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Mapping, Sequence
from email.utils import parsedate_to_datetime
from urllib.parse import unquote_plus

from backends.core.numbers import natural
from gateway.protocol.errors import (
    AccessDenied,
    AuthorizationQueryParametersError,
    ExpiredPresignedRequest,
    InvalidAccessKeyId,
    InvalidArgument,
    RequestTimeTooSkewed,
    SignatureDoesNotMatch,
)
from gateway.s3api.sigv4 import MAX_PRESIGN_EXPIRES, AuthContext, PayloadMode, parse_amz_date

QUERY_PARAMS = ("AWSAccessKeyId", "Signature", "Expires")
# Query parameters that are part of the signed resource (botocore's and S3's list).
SUBRESOURCES = frozenset({
    "accelerate", "acl", "analytics", "cors", "defaultObjectAcl", "delete", "inventory",
    "lifecycle", "location", "logging", "metrics", "notification", "object-lock",
    "partNumber", "policy", "replication", "requestPayment", "response-cache-control",
    "response-content-disposition", "response-content-encoding", "response-content-language",
    "response-content-type", "response-expires", "restore", "select", "select-type",
    "storageClass", "tagging", "torrent", "uploadId", "uploads", "versionId", "versioning",
    "versions", "website",
})
_NO_DATE = "AWS authentication requires a valid Date or x-amz-date header"
_QUERY_REQUIRED = ("Query-string authentication requires the Signature, Expires and "
                   "AWSAccessKeyId parameters")


def is_sigv2(headers: Mapping[str, list[str]], query: str) -> bool:
    """Whether a request carries a SigV2 signature (header or query string)."""
    authorization = headers.get("authorization")
    if authorization:
        return authorization[0].startswith("AWS ")
    names = {name for name, _ in parse_query(query)}
    return "AWSAccessKeyId" in names and "X-Amz-Algorithm" not in names


def parse_query(query: str) -> list[tuple[str, str | None]]:
    """Decoded (name, value) pairs of a raw query string; value None for ``?name``."""
    out: list[tuple[str, str | None]] = []
    for piece in query.split("&"):
        if piece:
            name, eq, value = piece.partition("=")
            out.append((unquote_plus(name), unquote_plus(value) if eq else None))
    return out


def authenticate_v2(*, method: str, raw_path: str, query: str,
                    headers: Mapping[str, list[str]], virtual_bucket: str | None,
                    secret_for: Callable[[str], str | None], now: float, region: str,
                    max_skew_seconds: float = 900) -> AuthContext:
    """Verify a SigV2 request (``query`` as sent, ``headers`` with lowercase names). The
    body is not covered by the signature (Content-MD5 is)."""
    pairs = parse_query(query)
    params = {name: value or "" for name, value in pairs if name in QUERY_PARAMS}
    authorization = headers.get("authorization")
    if authorization:
        if params.keys() & {"AWSAccessKeyId", "Signature"}:
            raise InvalidArgument("Only one auth mechanism allowed; only the X-Amz-Algorithm "
                                  "query parameter, Signature query string parameter or the "
                                  "Authorization header should be specified")
        access_key, signature = _parse_header(authorization)
        date = "" if "x-amz-date" in headers else _one(headers, "date")
        when = _request_time(headers)
        secret = _secret(secret_for, access_key)
        if abs(now - when) > max_skew_seconds:
            raise RequestTimeTooSkewed()
        presigned = False
    else:
        if any(name not in params for name in QUERY_PARAMS):
            raise AccessDenied(_QUERY_REQUIRED)
        access_key, signature, date = (params["AWSAccessKeyId"], params["Signature"],
                                       params["Expires"])
        expires = natural(date)
        if expires is None:
            raise AccessDenied("Invalid date (should be seconds since epoch): " + date)
        secret = _secret(secret_for, access_key)
        if now > expires:
            raise ExpiredPresignedRequest("Request has expired")
        if expires - now > MAX_PRESIGN_EXPIRES + max_skew_seconds:
            raise AuthorizationQueryParametersError(
                "Signature Version 2 presigned URLs may expire at most 604800 seconds (a "
                "week) from now.")
        presigned = True
    head = "\n".join([method, _one(headers, "content-md5"), _one(headers, "content-type"),
                      date, *canonical_amz_headers(headers), ""])
    paths = [raw_path or "/"]
    if virtual_bucket is None and paths[0].count("/") == 1 and paths[0] != "/":
        paths.append(paths[0] + "/")  # a bucket, as botocore signs it: /bucket/
    _check(secret, [head + canonical_resource(p, pairs, virtual_bucket) for p in paths],
           signature)
    return AuthContext(access_key=access_key, region=region, amz_date="", scope="",
                       signing_key=b"", seed_signature="", payload_mode=PayloadMode.UNSIGNED,
                       payload_sha256=None, presigned=presigned)


def canonical_resource(raw_path: str, query: Sequence[tuple[str, str | None]],
                       virtual_bucket: str | None) -> str:
    path = raw_path or "/"
    resource = f"/{virtual_bucket}{path}" if virtual_bucket else path
    subs = sorted(((n, v) for n, v in query if n in SUBRESOURCES), key=lambda p: p[0])
    if subs:
        resource += "?" + "&".join(n if v is None else f"{n}={v}" for n, v in subs)
    return resource


def canonical_amz_headers(headers: Mapping[str, list[str]]) -> list[str]:
    return [f"{name}:{','.join(v.strip() for v in values)}"
            for name, values in sorted(headers.items()) if name.startswith("x-amz-")]


def _parse_header(values: list[str]) -> tuple[str, str]:
    if len(values) != 1:
        raise InvalidArgument("Only one Authorization header is allowed.")
    access_key, colon, signature = values[0][4:].strip().rpartition(":")
    if not colon or not access_key or not signature:
        raise InvalidArgument("Authorization header is invalid -- one and only one ':' "
                              "(colon) and one and only one ' ' (space) are required.")
    return access_key, signature


def _one(headers: Mapping[str, list[str]], name: str) -> str:
    values = headers.get(name)
    return ",".join(v.strip() for v in values) if values else ""


def _request_time(headers: Mapping[str, list[str]]) -> float:
    """Seconds since the epoch of x-amz-date (preferred) or Date; AccessDenied."""
    value = _one(headers, "x-amz-date") or _one(headers, "date")
    if not value:
        raise AccessDenied(_NO_DATE)
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        pass
    when = parse_amz_date(value)  # ISO 8601 basic, as SigV4 clients send it
    if when is None:
        raise AccessDenied(_NO_DATE)
    return when


def _secret(secret_for: Callable[[str], str | None], access_key: str) -> str:
    secret = secret_for(access_key)
    if secret is None:
        raise InvalidAccessKeyId()
    return secret


def _check(secret: str, strings_to_sign: list[str], signature: str) -> None:
    """SignatureDoesNotMatch unless ``signature`` signs one of the candidate strings."""
    given = signature.encode("utf-8", "replace")
    for text in strings_to_sign:
        expected = base64.b64encode(hmac.digest(secret.encode("utf-8"), text.encode("utf-8"),
                                                hashlib.sha1))
        if hmac.compare_digest(expected, given):
            return
    raise SignatureDoesNotMatch()
