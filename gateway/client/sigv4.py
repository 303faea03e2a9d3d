"""The one SigV4 signer of every client of the gateway: the ``squall`` commands, the mount
(its light request path included), calibration and the load tests.

It computes what botocore's ``S3SigV4Auth`` computes for the same request (a test checks
the two against each other) at a fraction of the cost: the signing key is derived once a
day instead of for every request, and the request is not copied into an ``AWSRequest``
first. The mount's light path signs every request it sends, so that cost is per file.

Bodies are sent as ``UNSIGNED-PAYLOAD`` by default (what S3 SDKs do over TLS; the gateway
verifies the checksum header that the mount sends instead): hashing every byte in Python
would spend the CPU the transfer needs. ``sign_payload=True`` signs the SHA-256 of the body.
The path and query of ``url`` are signed as given: they must be encoded as S3 expects
(:func:`object_path`, :func:`query_string`).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from urllib.parse import quote

from gateway.client.credentials import Credentials

DEFAULT_REGION = "us-east-1"
ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: Headers never signed (botocore's list: a proxy or the transport may change them).
UNSIGNED_HEADERS = frozenset({
    "baggage", "connection", "expect", "keep-alive", "proxy-authenticate",
    "proxy-authorization", "te", "traceparent", "tracestate", "trailer",
    "transfer-encoding", "upgrade", "user-agent", "x-amzn-trace-id"})
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def object_path(bucket: str, key: str | None = None) -> str:
    """Path-style request path for a bucket or an object, percent-encoded as S3 expects."""
    path = "/" + quote(bucket, safe="")
    return path if key is None else f"{path}/{quote(key, safe='/~')}"


def query_string(params: Mapping[str, str] | None) -> str:
    """Canonical (sorted, RFC 3986 encoded) query string, without the leading '?'."""
    if not params:
        return ""
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
                    for k, v in sorted(params.items()))


def _split(url: str) -> tuple[str, str, str]:
    """``url``'s host as the Host header carries it (no default port), its path (``/``
    when empty) and its query."""
    scheme, _, rest = url.partition("://")
    slash = rest.find("/")
    netloc, target = (rest, "/") if slash < 0 else (rest[:slash], rest[slash:])
    path, _, query = target.partition("?")
    path = path.partition("#")[0] or "/"
    host, colon, port = netloc.rpartition("@")[2].rpartition(":")
    if not colon or "]" in port:  # no port (an IPv6 literal's colons are inside [])
        host = netloc.rpartition("@")[2]
    elif port == _DEFAULT_PORTS.get(scheme.lower()):
        pass
    else:
        host = f"{host}:{port}"
    return host.lower(), path, query.partition("#")[0]


def _canonical_query(query: str) -> str:
    if not query:
        return ""
    pairs = sorted(pair.partition("=")[::2] for pair in query.split("&"))
    return "&".join(f"{k}={v}" for k, v in pairs)


class Signer:
    """Signs requests with one set of credentials for one region (thread-safe)."""

    def __init__(self, credentials: Credentials, region: str = DEFAULT_REGION, *,
                 sign_payload: bool = False, clock: Callable[[], float] = time.time) -> None:
        self.credentials = credentials
        self.region = region
        self._sign_payload = sign_payload
        self._clock = clock
        self._scope_tail = f"/{region}/s3/aws4_request"
        self._key: tuple[str, bytes] = ("", b"")  # (day, its signing key)

    def _signing_key(self, day: str) -> bytes:
        cached = self._key
        if cached[0] == day:
            return cached[1]
        key = hmac.digest(("AWS4" + self.credentials.secret_key).encode(), day.encode(),
                          "sha256")
        for part in (self.region, "s3", "aws4_request"):
            key = hmac.digest(key, part.encode(), "sha256")
        self._key = (day, key)
        return key

    def sign(self, method: str, url: str, headers: Mapping[str, str] | None = None,
             body: bytes | bytearray | memoryview = b"") -> dict[str, str]:
        """``headers`` plus the SigV4 ones (``X-Amz-Date``, ``X-Amz-Content-SHA256``,
        ``Authorization``, and ``X-Amz-Security-Token`` with a session token) for
        ``method url``; ``body`` is read only with ``sign_payload``."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._clock()))
        payload = hashlib.sha256(body).hexdigest() if self._sign_payload else UNSIGNED_PAYLOAD
        out = {name: value for name, value in (headers or {}).items()
               if name.lower() not in ("authorization", "x-amz-date", "x-amz-content-sha256",
                                       "x-amz-security-token")}
        out["X-Amz-Date"] = stamp
        if self.credentials.token:
            out["X-Amz-Security-Token"] = self.credentials.token
        out["X-Amz-Content-SHA256"] = payload
        host, path, query = _split(url)
        signed: dict[str, list[str]] = {}
        for name, value in out.items():
            lname = name.lower()
            if lname not in UNSIGNED_HEADERS:
                signed.setdefault(lname, []).append(" ".join(value.split()))
        signed.setdefault("host", [host])
        names = sorted(signed)
        signed_names = ";".join(names)
        canonical = "\n".join((
            method.upper(), path, _canonical_query(query),
            "".join(f"{n}:{','.join(signed[n])}\n" for n in names), signed_names, payload))
        day = stamp[:8]
        string_to_sign = (f"{ALGORITHM}\n{stamp}\n{day}{self._scope_tail}\n"
                          + hashlib.sha256(canonical.encode()).hexdigest())
        signature = hmac.digest(self._signing_key(day), string_to_sign.encode(),
                                "sha256").hex()
        out["Authorization"] = (f"{ALGORITHM} Credential={self.credentials.access_key}/{day}"
                                f"{self._scope_tail}, SignedHeaders={signed_names}, "
                                f"Signature={signature}")
        return out
