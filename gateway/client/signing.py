"""Signed requests to a gateway's admin and status routes, as every command sends them.

The status views (docs/security.md) take ``SQUALL_STATUS_TOKEN`` as ``Authorization:
Bearer``; else a SigV4 signature with the client credentials (:mod:`credentials`); else
nothing (a ``--public-status`` gateway). The admin routes take a signature only.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import Any

import httpx

from gateway.client.credentials import Credentials, MissingCredentials, credentials_from_env
from gateway.client.failures import json_of, reaching
from gateway.client.sigv4 import DEFAULT_REGION, Signer, query_string

TOKEN_ENV = "SQUALL_STATUS_TOKEN"


def signed_headers(url: str, credentials: Credentials, *, method: str = "GET",
                   region: str = DEFAULT_REGION) -> dict[str, str]:
    """SigV4 headers for a bodiless ``method`` request to ``url`` (with its query)."""
    return Signer(credentials, region, sign_payload=True).sign(method, url)


def status_headers(url: str, *, method: str = "GET", region: str = DEFAULT_REGION,
                   environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Headers authorizing a bodiless ``method`` request to ``url`` (with its query)."""
    if environ.get(TOKEN_ENV):
        return {"Authorization": f"Bearer {environ[TOKEN_ENV]}"}
    try:
        credentials = credentials_from_env(environ)
    except MissingCredentials:
        return {}
    return signed_headers(url, credentials, method=method, region=region)


def admin_call(endpoint: str, path: str, credentials: Credentials, *, method: str = "GET",
               params: Mapping[str, str] | None = None, region: str = DEFAULT_REGION,
               timeout: float = 30.0, verify: ssl.SSLContext | bool = True) -> Any:
    """The JSON answer of a signed, bodiless request to the admin route ``path``
    (``/_squall/...``) of the gateway at ``endpoint``; Unreachable, Refused (the
    gateway's error) or BadAnswer (:mod:`failures`) otherwise."""
    query = query_string(params)
    url = endpoint.rstrip("/") + path + (f"?{query}" if query else "")
    with reaching(endpoint):
        response = httpx.request(method, url, timeout=timeout, verify=verify,
                                 headers=signed_headers(url, credentials, method=method,
                                                        region=region))
    return json_of(response)
