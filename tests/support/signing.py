"""Sign raw HTTP requests with botocore's own SigV4 signer, for hand-made bad inputs."""

from __future__ import annotations

import datetime
import hashlib
from unittest import mock

import httpx
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.server import ACCESS_KEY, SECRET_KEY


def signed_headers(method: str, url: str, body: bytes = b"",
                   headers: dict[str, str] | None = None, *, access_key: str = ACCESS_KEY,
                   secret_key: str = SECRET_KEY, clock_offset_s: float = 0,
                   payload_hash: str | None = None) -> dict[str, str]:
    """Headers of a SigV4-signed request; ``clock_offset_s`` signs with a skewed clock,
    ``payload_hash`` is the x-amz-content-sha256 signed (default: the body's SHA-256)."""
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    request.headers["x-amz-content-sha256"] = payload_hash or hashlib.sha256(body).hexdigest()
    signer = S3SigV4Auth(Credentials(access_key, secret_key), "s3", "us-east-1")
    skewed = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + \
        datetime.timedelta(seconds=clock_offset_s)
    # The signer reads the client's clock; a skewed client is produced by moving it.
    with mock.patch("botocore.auth.get_current_datetime", return_value=skewed):
        signer.add_auth(request)
    return dict(request.headers.items())


def send(method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None,
         **kwargs: str) -> httpx.Response:
    """Send a correctly signed request (url must already be percent-encoded)."""
    return httpx.request(method, url, content=body,
                         headers=signed_headers(method, url, body, headers, **kwargs))
