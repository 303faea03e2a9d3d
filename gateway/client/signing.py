"""What a command line client sends to read the status views (docs/security.md).

``SQUALL_STATUS_TOKEN`` as ``Authorization: Bearer``; else a SigV4 signature with the
client credentials (``SQUALL_ACCESS_KEY``/``SQUALL_SECRET_KEY`` or
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``); else nothing (a ``--public-status``
gateway).
"""

from __future__ import annotations

import hashlib
import os
import urllib.parse
from collections.abc import Mapping

import httpx
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

TOKEN_ENV = "SQUALL_STATUS_TOKEN"
_PAIRS = (("SQUALL_ACCESS_KEY", "SQUALL_SECRET_KEY"),
          ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"))


def credentials_from_env(environ: Mapping[str, str] = os.environ) -> Credentials:
    """The client credentials every command uses: ``SQUALL_ACCESS_KEY``/
    ``SQUALL_SECRET_KEY``, else ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``; ValueError
    when neither pair is set."""
    for access, secret in _PAIRS:
        if environ.get(access) and environ.get(secret):
            return Credentials(environ[access], environ[secret])
    raise ValueError("no credentials: set SQUALL_ACCESS_KEY and SQUALL_SECRET_KEY")


def signed_headers(url: str, credentials: Credentials, *, method: str = "GET",
                   region: str = "us-east-1") -> dict[str, str]:
    """SigV4 headers for a bodiless ``method`` request to ``url`` (with its query)."""
    request = AWSRequest(method=method, url=url, data=b"")
    request.headers["x-amz-content-sha256"] = hashlib.sha256(b"").hexdigest()
    S3SigV4Auth(credentials, "s3", region).add_auth(request)
    return dict(request.headers.items())


def admin_request(endpoint: str, path: str, credentials: Credentials, *, method: str = "GET",
                  params: Mapping[str, str] | None = None, region: str = "us-east-1",
                  timeout: float = 30.0) -> httpx.Response:
    """A signed, bodiless request to the admin route ``path`` (``/_squall/...``) of the
    gateway at ``endpoint``; httpx.HTTPError when it cannot be reached."""
    query = urllib.parse.urlencode(sorted((params or {}).items()),
                                   quote_via=urllib.parse.quote)
    url = endpoint.rstrip("/") + path + (f"?{query}" if query else "")
    return httpx.request(method, url, timeout=timeout,
                         headers=signed_headers(url, credentials, method=method, region=region))


def refusal_detail(response: httpx.Response) -> str:
    """One line for an admin route's refusal: its JSON ``CODE: message``, else the status
    and the start of the body."""
    try:
        body = response.json()
        return f"{body['error']}: {body['message']}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code} {response.text[:200]}"


def status_headers(url: str, *, method: str = "GET", region: str = "us-east-1",
                   environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Headers authorizing a bodiless ``method`` request to ``url`` (with its query)."""
    if environ.get(TOKEN_ENV):
        return {"Authorization": f"Bearer {environ[TOKEN_ENV]}"}
    try:
        credentials = credentials_from_env(environ)
    except ValueError:
        return {}
    return signed_headers(url, credentials, method=method, region=region)
