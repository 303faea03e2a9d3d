"""AWS Signature Version 4 verification of S3 requests: Authorization header and presigned URLs.

:func:`authenticate` rebuilds the canonical request the way S3 does and compares signatures;
it returns an :class:`AuthContext` that the body pipeline (:mod:`gateway.s3api.chunked`,
:mod:`gateway.s3api.body`) uses to verify aws-chunked signatures and payload hashes.

Strings given to :func:`authenticate` carry the bytes of the wire: the ASGI convention of
latin-1 decoded header values and paths is assumed (a value with characters beyond latin-1
is taken as UTF-8). The canonical URI is the raw path percent-decoded and re-encoded segment
by segment (S3 does not double-encode); the canonical query string is decoded (``+`` is a
space, as in form decoding), re-encoded and sorted. A signature computed over the literal
path and query as sent is accepted too: it authenticates exactly the bytes received and keeps
clients that skip S3's re-encoding working.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import hmac
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote_to_bytes

from backends.core.numbers import integer
from gateway.protocol.errors import (
    AccessDenied,
    AuthorizationHeaderMalformed,
    AuthorizationQueryParametersError,
    ExpiredPresignedRequest,
    InvalidAccessKeyId,
    InvalidArgument,
    InvalidRequest,
    ProtocolError,
    RequestTimeTooSkewed,
    SignatureDoesNotMatch,
)

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "s3"
TERMINATOR = "aws4_request"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
MAX_PRESIGN_EXPIRES = 604800  # one week, in seconds

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_SIGNATURE = re.compile(r"[0-9a-f]{64}")
_AMZ_DATE = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_DATE8 = re.compile(r"[0-9]{8}")
_PLAIN_PATH = re.compile(r"[A-Za-z0-9\-._~/]*")
_SIGNED_HEADERS = re.compile(r"[a-z0-9!#$%&'*+.^_`|~-]+(?:;[a-z0-9!#$%&'*+.^_`|~-]+)*")

_UNSUPPORTED_MECHANISM = ("The authorization mechanism you have provided is not supported. "
                          "Please use AWS4-HMAC-SHA256.")
_NO_DATE = "AWS authentication requires a valid Date or x-amz-date header"
_UNSIGNED_HEADERS = "There were headers present in the request which were not signed"
_QUERY_REQUIRED = ("Query-string authentication version 4 requires the X-Amz-Algorithm, "
                   "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, "
                   "and X-Amz-Expires parameters.")
_BAD_CONTENT_SHA256 = ("x-amz-content-sha256 must be UNSIGNED-PAYLOAD, "
                       "STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, "
                       "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.")


class PayloadMode(enum.Enum):
    """How the request body is protected, from ``x-amz-content-sha256``."""

    UNSIGNED = "UNSIGNED-PAYLOAD"
    SIGNED = "SIGNED"  # the header holds the hex SHA-256 of the whole body
    STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
    STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    STREAMING_SIGNED_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"

    @property
    def streaming(self) -> bool:
        """The body is aws-chunked encoded."""
        return self in _STREAMING

    @property
    def signed_chunks(self) -> bool:
        """Every aws-chunked chunk carries a chained signature."""
        return self is PayloadMode.STREAMING_SIGNED or self is PayloadMode.STREAMING_SIGNED_TRAILER

    @property
    def trailer(self) -> bool:
        """Trailing headers may follow the final chunk."""
        return (self is PayloadMode.STREAMING_UNSIGNED_TRAILER
                or self is PayloadMode.STREAMING_SIGNED_TRAILER)


_STREAMING = frozenset({PayloadMode.STREAMING_SIGNED, PayloadMode.STREAMING_UNSIGNED_TRAILER,
                        PayloadMode.STREAMING_SIGNED_TRAILER})
_STREAMING_BY_VALUE = {mode.value: mode for mode in _STREAMING}

@dataclass(frozen=True, slots=True)
class AuthContext:
    """Who signed the request, and what the body pipeline needs to keep verifying it."""

    access_key: str
    region: str
    amz_date: str  # yyyymmddThhmmssZ, as signed
    scope: str  # date/region/s3/aws4_request
    signing_key: bytes
    seed_signature: str  # hex signature of the request (first link of the chunk chain)
    payload_mode: PayloadMode
    payload_sha256: str | None  # lowercase hex when payload_mode is SIGNED
    presigned: bool


@functools.lru_cache(maxsize=256)
def signing_key(secret: str, date: str, region: str, service: str = SERVICE) -> bytes:
    """The SigV4 signing key; cached per (secret, date, region) since it changes once a day."""
    k = hmac.digest(("AWS4" + secret).encode("utf-8"), date.encode("ascii"), "sha256")
    k = hmac.digest(k, region.encode("utf-8"), "sha256")
    k = hmac.digest(k, service.encode("utf-8"), "sha256")
    return hmac.digest(k, TERMINATOR.encode("ascii"), "sha256")


def sign_hex(key: bytes, string_to_sign: str) -> str:
    """HMAC-SHA256 of ``string_to_sign`` under ``key``, as lowercase hex."""
    return hmac.digest(key, string_to_sign.encode("utf-8"), "sha256").hex()


def parse_payload_mode(value: str) -> tuple[PayloadMode, str | None]:
    """``x-amz-content-sha256`` -> (mode, lowercase hex digest when SIGNED); InvalidArgument."""
    if value == UNSIGNED_PAYLOAD:
        return PayloadMode.UNSIGNED, None
    mode = _STREAMING_BY_VALUE.get(value)
    if mode is not None:
        return mode, None
    if _HEX64.fullmatch(value):
        return PayloadMode.SIGNED, value.lower()
    raise InvalidArgument(_BAD_CONTENT_SHA256)


def authenticate(*, method: str, raw_path: str, query: str,
                 headers: Sequence[tuple[str, str]], secret_for: Callable[[str], str | None],
                 now: float, max_skew_seconds: float = 900) -> AuthContext:
    """Verify the SigV4 signature of a request and describe how its body is protected.

    ``headers`` has lowercase names and may repeat a name; ``secret_for`` maps an access
    key to its secret (None if unknown); ``now`` is seconds since the epoch.
    """
    hmap: dict[str, list[str]] = {}
    for name, value in headers:
        hmap.setdefault(name, []).append(value)
    pairs = _split_query(query)
    authorization = hmap.get("authorization")
    presigned = any(p.name == "X-Amz-Algorithm" for p in pairs)
    if authorization is not None and presigned:
        raise InvalidArgument("Only one auth mechanism allowed; only the X-Amz-Algorithm query "
                              "parameter, Signature query string parameter or the Authorization "
                              "header should be specified")
    if authorization is not None:
        return _authenticate_header(method, raw_path, pairs, hmap, authorization, secret_for,
                                    now, max_skew_seconds)
    if presigned:
        return _authenticate_query(method, raw_path, pairs, hmap, secret_for, now,
                                   max_skew_seconds)
    names = {p.name for p in pairs}
    if "Signature" in names and "AWSAccessKeyId" in names:
        raise InvalidRequest(_UNSUPPORTED_MECHANISM)
    raise AccessDenied()


# --- the two ways of carrying a signature ----------------------------------------------------


def _authenticate_header(method: str, raw_path: str, pairs: list[_Param],
                         hmap: dict[str, list[str]], authorization: list[str],
                         secret_for: Callable[[str], str | None], now: float,
                         max_skew: float) -> AuthContext:
    if len(authorization) != 1:
        raise AuthorizationHeaderMalformed("The authorization header is malformed; "
                                           "only one Authorization header is allowed.")
    fields = _parse_authorization(authorization[0])
    access_key, cred_date, region = _parse_credential(fields["Credential"],
                                                      AuthorizationHeaderMalformed)
    signed = _parse_signed_headers(fields["SignedHeaders"], AuthorizationHeaderMalformed)
    signature = fields["Signature"]

    content_sha = hmap.get("x-amz-content-sha256")
    if content_sha is None:
        raise InvalidRequest("Missing required header for this request: x-amz-content-sha256")
    if len(content_sha) != 1:
        raise InvalidArgument(_BAD_CONTENT_SHA256)
    payload_hash = content_sha[0]
    mode, sha = parse_payload_mode(payload_hash)

    amz_date, when = _request_date(hmap)
    if cred_date != amz_date[:8]:
        raise AuthorizationHeaderMalformed(
            "The authorization header is malformed; Invalid credential date. "
            "Date is not the same as X-Amz-Date.")
    secret = secret_for(access_key)
    if secret is None:
        raise InvalidAccessKeyId()
    if abs(now - when) > max_skew:
        raise RequestTimeTooSkewed()

    scope = f"{cred_date}/{region}/{SERVICE}/{TERMINATOR}"
    key = signing_key(secret, cred_date, region)
    _check_signature(method, raw_path, pairs, hmap, signed, payload_hash, amz_date, scope, key,
                     signature)
    _check_all_amz_headers_signed(hmap, signed)
    return AuthContext(access_key=access_key, region=region, amz_date=amz_date, scope=scope,
                       signing_key=key, seed_signature=signature, payload_mode=mode,
                       payload_sha256=sha, presigned=False)


def _authenticate_query(method: str, raw_path: str, pairs: list[_Param],
                        hmap: dict[str, list[str]], secret_for: Callable[[str], str | None],
                        now: float, max_skew: float) -> AuthContext:
    err = AuthorizationQueryParametersError
    params: dict[str, str] = {}
    for p in pairs:
        if p.name.startswith("X-Amz-"):
            if p.name in params:
                raise err(f"{p.name} must appear only once.")
            params[p.name] = p.value
    required = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-Date",
                "X-Amz-SignedHeaders", "X-Amz-Expires")
    if any(name not in params for name in required):
        raise err(_QUERY_REQUIRED)
    if params["X-Amz-Algorithm"] != ALGORITHM:
        raise err('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
    access_key, cred_date, region = _parse_credential(params["X-Amz-Credential"], err)
    signed = _parse_signed_headers(params["X-Amz-SignedHeaders"], err)
    amz_date = params["X-Amz-Date"]
    when = _parse_amz_date(amz_date)
    if when is None:
        raise err("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
    expires = integer(params["X-Amz-Expires"])
    if expires is None:
        raise err("X-Amz-Expires should be a number")
    # S3's range is 1..604800: out of it, S3's 400 and words; 0 is a URL that has expired.
    if expires < 0:
        raise err("X-Amz-Expires must be non-negative")
    if expires > MAX_PRESIGN_EXPIRES:
        raise err("X-Amz-Expires must be less than a week (in seconds); that is, the given "
                  f"X-Amz-Expires must be less than {MAX_PRESIGN_EXPIRES} seconds")
    if cred_date != amz_date[:8]:
        raise err("Invalid credential date. Date is not the same as X-Amz-Date.")

    # The payload hash of a presigned request: the X-Amz-Content-Sha256 parameter, else the
    # x-amz-content-sha256 header, else UNSIGNED-PAYLOAD.
    content_sha = hmap.get("x-amz-content-sha256")
    if content_sha is not None and len(content_sha) != 1:
        raise InvalidArgument(_BAD_CONTENT_SHA256)
    payload_hash = params.get("X-Amz-Content-Sha256") or (
        content_sha[0] if content_sha else UNSIGNED_PAYLOAD)
    mode, sha = parse_payload_mode(payload_hash)

    secret = secret_for(access_key)
    if secret is None:
        raise InvalidAccessKeyId()
    if when - now > max_skew:
        raise AccessDenied("Request is not valid yet")
    if expires == 0 or now > when + expires:
        raise ExpiredPresignedRequest("Request has expired")

    signature = params["X-Amz-Signature"]
    scope = f"{cred_date}/{region}/{SERVICE}/{TERMINATOR}"
    key = signing_key(secret, cred_date, region)
    unsigned_pairs = [p for p in pairs if p.name != "X-Amz-Signature"]
    _check_signature(method, raw_path, unsigned_pairs, hmap, signed, payload_hash, amz_date,
                     scope, key, signature)
    _check_all_amz_headers_signed(hmap, signed)
    return AuthContext(access_key=access_key, region=region, amz_date=amz_date, scope=scope,
                       signing_key=key, seed_signature=signature, payload_mode=mode,
                       payload_sha256=sha, presigned=True)


# --- parsing ---------------------------------------------------------------------------------


def _parse_authorization(value: str) -> dict[str, str]:
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        if algorithm == "AWS":
            raise InvalidRequest(_UNSUPPORTED_MECHANISM)
        raise InvalidArgument("Unsupported Authorization Type")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, eq, val = part.strip().partition("=")
        if not eq or name in fields:
            raise AuthorizationHeaderMalformed(
                f"The authorization header is malformed; the authorization component "
                f"\"{part.strip()}\" is malformed.")
        fields[name] = val.strip()
    for name in ("Credential", "SignedHeaders", "Signature"):
        if not fields.get(name):
            raise AuthorizationHeaderMalformed(
                f"The authorization header is malformed; missing {name}.")
    return fields


def _parse_credential(value: str, err: type[ProtocolError]) -> tuple[str, str, str]:
    parts = value.split("/")
    if len(parts) != 5 or not parts[0] or not parts[2] or not _DATE8.fullmatch(parts[1]):
        what = ("The authorization header is malformed; the Credential is mal-formed; "
                if err is AuthorizationHeaderMalformed else
                "Error parsing the X-Amz-Credential parameter; the Credential is mal-formed; ")
        raise err(what + 'expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".')
    access_key, date, region, service, terminator = parts
    if service != SERVICE:
        raise err(f'Incorrect service "{service}". This endpoint belongs to "{SERVICE}".')
    if terminator != TERMINATOR:
        raise err(f'Incorrect terminal "{terminator}". This endpoint uses "{TERMINATOR}".')
    return access_key, date, region


def _parse_signed_headers(value: str, err: type[ProtocolError]) -> list[str]:
    if not _SIGNED_HEADERS.fullmatch(value):
        raise err("SignedHeaders must be a semicolon-separated list of lowercase header names.")
    names = value.split(";")
    if "host" not in names:
        raise err("SignedHeaders must include the host header.")
    return names


def parse_amz_date(value: str) -> float | None:
    """Seconds since the epoch of ``yyyymmddThhmmssZ``; None if it is not one."""
    return _parse_amz_date(value)


def _parse_amz_date(value: str) -> float | None:
    if not _AMZ_DATE.fullmatch(value):
        return None
    try:
        return datetime(int(value[0:4]), int(value[4:6]), int(value[6:8]), int(value[9:11]),
                        int(value[11:13]), int(value[13:15]), tzinfo=UTC).timestamp()
    except ValueError:
        return None


def _request_date(hmap: dict[str, list[str]]) -> tuple[str, float]:
    """(amz_date, seconds) from x-amz-date, else from Date; AccessDenied if neither is valid."""
    amz = hmap.get("x-amz-date")
    if amz is not None:
        when = _parse_amz_date(amz[0]) if len(amz) == 1 else None
        if when is None:
            raise AccessDenied(_NO_DATE)
        return amz[0], when
    date = hmap.get("date")
    if date is None or len(date) != 1:
        raise AccessDenied(_NO_DATE)
    try:
        parsed = parsedate_to_datetime(date[0])
    except (TypeError, ValueError, IndexError):
        raise AccessDenied(_NO_DATE) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    parsed = parsed.astimezone(UTC)
    return parsed.strftime("%Y%m%dT%H%M%SZ"), parsed.timestamp()


@dataclass(frozen=True, slots=True)
class _Param:
    raw: str  # "k=v" piece as sent
    name: str  # decoded
    value: str  # decoded
    canonical: tuple[str, str]  # (name, value) re-encoded the S3 way


def _wire(text: str) -> bytes:
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def _split_query(query: str) -> list[_Param]:
    out: list[_Param] = []
    if not query:
        return out
    for piece in query.split("&"):
        if not piece:
            continue
        raw_k, _, raw_v = piece.partition("=")
        k = unquote_to_bytes(_wire(raw_k).replace(b"+", b" "))
        v = unquote_to_bytes(_wire(raw_v).replace(b"+", b" "))
        out.append(_Param(raw=piece, name=k.decode("utf-8", "replace"),
                          value=v.decode("utf-8", "replace"),
                          canonical=(quote(k, safe="-_.~"), quote(v, safe="-_.~"))))
    return out


def _canonical_uri(raw_path: str) -> str:
    if not raw_path:
        return "/"
    if _PLAIN_PATH.fullmatch(raw_path):
        return raw_path
    return "/".join(quote(unquote_to_bytes(seg), safe="-_.~")
                    for seg in _wire(raw_path).split(b"/"))


def _canonical_query(pairs: list[_Param]) -> str:
    # Sorted by encoded name, then by encoded value (tuples: "a" sorts before "a-b").
    return "&".join(f"{k}={v}" for k, v in sorted(p.canonical for p in pairs))


def _literal_query(pairs: list[_Param]) -> str:
    return "&".join(f"{k}={v}" for k, v in sorted(p.raw.partition("=")[::2] for p in pairs))


# --- verification ----------------------------------------------------------------------------


def _check_signature(method: str, raw_path: str, pairs: list[_Param],
                     hmap: dict[str, list[str]], signed: list[str], payload_hash: str,
                     amz_date: str, scope: str, key: bytes, signature: str) -> None:
    if not _SIGNATURE.fullmatch(signature):
        raise SignatureDoesNotMatch()
    lines = []
    for name in signed:
        values = hmap.get(name)
        if values is not None:  # a listed but absent header is left out, as S3 does
            lines.append(f"{name}:{','.join(_canonical_value(v) for v in values)}\n")
    tail = f"{''.join(lines)}\n{';'.join(signed)}\n{payload_hash}"
    candidates = [(_canonical_uri(raw_path), _canonical_query(pairs))]
    literal = (raw_path or "/", _literal_query(pairs))
    if literal != candidates[0]:
        candidates.append(literal)
    expected = signature.encode("ascii")
    for uri, canonical_query in candidates:
        canonical = f"{method}\n{uri}\n{canonical_query}\n{tail}"
        digest = hashlib.sha256(_wire(canonical)).hexdigest()
        string_to_sign = f"{ALGORITHM}\n{amz_date}\n{scope}\n{digest}"
        if hmac.compare_digest(sign_hex(key, string_to_sign).encode("ascii"), expected):
            return
    raise SignatureDoesNotMatch()


def _canonical_value(value: str) -> str:
    """A header value with its whitespace trimmed and runs collapsed, as the client did
    it on its own text. ``value`` holds the wire bytes as latin-1; a client that sent
    UTF-8 collapsed the whitespace of the decoded text, where the bytes 0x85 and 0xA0
    inside a character (the "à" of C3 A0) are not whitespace."""
    if value.isascii():
        return " ".join(value.split())
    raw = value.encode("latin-1")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return " ".join(value.split())  # latin-1 text, collapsed as such
    return " ".join(text.split()).encode("utf-8").decode("latin-1")


def _check_all_amz_headers_signed(hmap: dict[str, list[str]], signed: list[str]) -> None:
    signed_set = set(signed)
    for name in hmap:
        if (name.startswith("x-amz-") and name not in signed_set
                and name != "x-amz-content-sha256"):
            raise AccessDenied(_UNSIGNED_HEADERS)
