"""A lighter path for the mount's two hottest requests, PutObject of a whole file held in
memory and HeadObject: signed with botocore's own SigV4 signer and sent over a urllib3
pool, without botocore's request pipeline (serialisation, event hooks, response parsing
and, for a missing key, its exceptions): that pipeline was three quarters of the mount's
CPU per small file.

Only the plain outcomes are handled here: a stored object, a HEAD's 200 or 404. Anything
else (another status, a dropped connection, a timeout) returns None and the caller sends
the same request through boto3, whose retries and error translation then decide the
outcome exactly as for every other request.
"""

from __future__ import annotations

import email.utils
import logging
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import urllib3
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

log = logging.getLogger(__name__)

# Bodies are not signed: the gateway verifies their CRC32C header (as for boto3's requests).
_CLIENT_CONFIG = Config(s3={"payload_signing_enabled": False})
_META = "x-amz-meta-"

#: What a HEAD found: (size, ETag, mtime, user metadata), or MISSING (404).
Head = tuple[int, str, float, dict[str, str]]
MISSING = "missing"


class LightRequests:
    """PutObject and HeadObject on one bucket (thread-safe)."""

    def __init__(self, endpoint: str, bucket: str, access_key: str, secret_key: str, *,
                 region: str, pool_size: int, connect_timeout: float,
                 read_timeout: float, ca_bundle: Path | None = None) -> None:
        self._base = endpoint.rstrip("/") + "/" + urllib.parse.quote(bucket, safe="") + "/"
        self._signer = S3SigV4Auth(Credentials(access_key, secret_key), "s3", region)
        tls: dict[str, Any] = {"ca_certs": str(ca_bundle)} if ca_bundle is not None else {}
        self._pool = urllib3.PoolManager(
            num_pools=4, maxsize=pool_size, block=False, retries=False,
            timeout=urllib3.Timeout(connect=connect_timeout, read=read_timeout), **tls)

    def put(self, key: str, data: bytes | bytearray, metadata: Mapping[str, str],
            crc32c: str) -> str | None:
        """The new object's ETag, or None when the request did not succeed (or cannot be
        sent this way: metadata that is not ASCII); the caller then uses boto3."""
        headers = {"Content-Length": str(len(data)), "x-amz-checksum-crc32c": crc32c}
        for name, value in metadata.items():
            if not (name.isascii() and value.isascii()):
                return None
            headers[_META + name] = value
        # urllib3 sends a bytearray as a memoryview of it (no copy).
        response = self._send("PUT", key, headers, data)
        if response is None or response.status != 200:
            return None
        return str(response.headers.get("ETag", ""))

    def head(self, key: str) -> Head | str | None:
        """The object's size, ETag, mtime and user metadata; MISSING on a 404; None for
        anything else (the caller then uses boto3)."""
        response = self._send("HEAD", key, {}, None)
        if response is None:
            return None
        if response.status == 404:
            return MISSING
        h = response.headers
        try:
            if response.status != 200:
                raise ValueError(response.status)
            mtime = email.utils.parsedate_to_datetime(h["Last-Modified"]).timestamp()
            size = int(h["Content-Length"])
        except (KeyError, TypeError, ValueError):
            return None
        metadata = {k[len(_META):]: v for k, v in h.items()
                    if k.lower().startswith(_META)}
        return size, str(h.get("ETag", "")), mtime, metadata

    def _send(self, method: str, key: str, headers: dict[str, str],
              body: bytes | bytearray | None) -> urllib3.BaseHTTPResponse | None:
        url = self._base + urllib.parse.quote(key, safe="/~")
        request = AWSRequest(method=method, url=url, data=b"", headers=headers)
        request.context["client_config"] = _CLIENT_CONFIG
        self._signer.add_auth(request)
        try:
            return self._pool.request(method, url, body=body,  # type: ignore[arg-type]
                                      headers=dict(request.headers.items()),
                                      preload_content=True, redirect=False)
        except urllib3.exceptions.HTTPError as exc:
            log.debug("%s %s: %s; sending it again through boto3", method, key, exc)
            return None
