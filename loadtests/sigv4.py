"""SigV4 request signing with botocore, shared by the Locust user and the benchmark client.

Payloads are sent as ``UNSIGNED-PAYLOAD`` by default (what S3 SDKs do over TLS): hashing
every byte in Python would spend the CPU the server under test needs. ``sign_payload=True``
signs the SHA-256 of the body instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import quote

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

DEFAULT_REGION = "us-east-1"


class MissingCredentials(RuntimeError):
    """Neither SQUALL_ACCESS_KEY/SQUALL_SECRET_KEY nor AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY set."""


def load_credentials(env: Mapping[str, str] | None = None) -> Credentials:
    """Read credentials from SQUALL_ACCESS_KEY/SQUALL_SECRET_KEY, else the AWS_* variables."""
    env = os.environ if env is None else env
    for access, secret in (
        ("SQUALL_ACCESS_KEY", "SQUALL_SECRET_KEY"),
        ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
    ):
        if env.get(access) and env.get(secret):
            return Credentials(env[access], env[secret], env.get("AWS_SESSION_TOKEN"))
    raise MissingCredentials(
        "set SQUALL_ACCESS_KEY and SQUALL_SECRET_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
    )


def object_path(bucket: str, key: str | None = None) -> str:
    """Path-style request path for a bucket or an object, percent-encoded as S3 expects."""
    path = "/" + quote(bucket, safe="")
    return path if key is None else f"{path}/{quote(key, safe='/~')}"


def query_string(params: Mapping[str, str] | None) -> str:
    """Canonical (sorted, RFC 3986 encoded) query string, without the leading '?'."""
    if not params:
        return ""
    return "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(params.items())
    )


class Signer:
    """Signs requests for one set of credentials and one region."""

    def __init__(
        self,
        credentials: Credentials,
        region: str = DEFAULT_REGION,
        *,
        sign_payload: bool = False,
    ) -> None:
        self._auth = S3SigV4Auth(credentials, "s3", region)
        self._sign_payload = sign_payload
        self._config = Config(s3={"payload_signing_enabled": sign_payload})

    def sign(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        body: bytes | memoryview = b"",
    ) -> dict[str, str]:
        """Return ``headers`` plus the SigV4 ones for ``method url`` (``url`` already encoded)."""
        data = bytes(body) if self._sign_payload else b""  # unsigned: the body is never read
        request = AWSRequest(method=method, url=url, headers=dict(headers or {}), data=data)
        request.context["client_config"] = self._config
        self._auth.add_auth(request)
        return dict(request.headers.items())
