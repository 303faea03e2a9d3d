"""``s3:URL`` -> :class:`S3Config`: the upstream endpoint and options, validated once.

``URL`` is the upstream endpoint with options as query parameters, e.g.
``https://s3.eu-west-1.amazonaws.com?region=eu-west-1&bucket=shared&prefix=squall/``.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

MiB = 1 << 20
MIN_UPSTREAM_PART = 5 * MiB

# option name -> short description, used in error messages.
OPTIONS = {
    "region": "signing region (default us-east-1)",
    "addressing": "path | virtual | auto (default path)",
    "bucket": "map every Squall bucket to a prefix of this one upstream bucket",
    "prefix": "key prefix inside the upstream bucket (only with bucket=)",
    "part_size": "part size in bytes when a PUT turns into a multipart upload (>= 5 MiB)",
    "concurrency": "parts of one PUT uploaded at once (>= 1)",
    "max_connections": "connection pool size (>= 1)",
    "retries": "attempts per request, the first included (>= 1)",
    "connect_timeout": "seconds to open a connection",
    "read_timeout": "seconds to wait for a response or the next bytes of one",
    "list_concurrency": "HEAD requests in flight while listing (>= 1)",
}

ACCESS_KEY_ENV = "SQUALL_UPSTREAM_ACCESS_KEY"
SECRET_KEY_ENV = "SQUALL_UPSTREAM_SECRET_KEY"


@dataclass(frozen=True, slots=True)
class S3Config:
    """Everything the S3 backend needs to reach and use its upstream."""

    endpoint: str
    region: str = "us-east-1"
    addressing: Literal["path", "virtual", "auto"] = "path"
    bucket: str | None = None  # shared mode: one upstream bucket, Squall buckets are prefixes
    prefix: str = ""
    part_size: int = 8 * MiB
    concurrency: int = 4
    max_connections: int = 32
    retries: int = 3
    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    list_concurrency: int = 16
    # Squall's own minimum part size (BackendOptions.min_part_size), checked at completion.
    min_part_size: int = 5 * MiB
    # Copies larger than this use UploadPartCopy in parts of copy_part_size (S3: 5 GiB).
    copy_threshold: int = 5 << 30
    copy_part_size: int = 512 * MiB
    access_key: str | None = None  # None: the standard AWS credential chain
    secret_key: str | None = None


def _int(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"s3 backend option {name}={value!r} is not an integer") from None
    if number < minimum:
        raise ValueError(f"s3 backend option {name}={number} must be >= {minimum}")
    return number


def _seconds(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"s3 backend option {name}={value!r} is not a number") from None
    if not number > 0:
        raise ValueError(f"s3 backend option {name}={value!r} must be > 0")
    return number


def parse_config(args: str, environ: Mapping[str, str] | None = None, *,
                 min_part_size: int = 5 * MiB) -> S3Config:
    """Parse ``URL[?option=value&...]``; ValueError with a readable message if invalid."""
    env = os.environ if environ is None else environ
    url = urllib.parse.urlsplit(args.strip())
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"s3 backend needs an http(s) endpoint URL such as "
                         f"s3:https://s3.eu-west-1.amazonaws.com, not {args!r}")
    try:
        url.port  # noqa: B018 - validates the port
    except ValueError:
        raise ValueError(f"s3 backend endpoint {args!r} has an invalid port") from None
    if url.path not in ("", "/") or url.fragment or url.username or url.password:
        raise ValueError(f"s3 backend endpoint must be scheme://host[:port] without a path, "
                         f"user or fragment (options go in ?query), not {args!r}")
    pairs = urllib.parse.parse_qsl(url.query, keep_blank_values=True, strict_parsing=False)
    options: dict[str, str] = {}
    for name, value in pairs:
        if name not in OPTIONS:
            known = ", ".join(sorted(OPTIONS))
            raise ValueError(f"unknown s3 backend option {name!r}; known: {known}")
        if name in options:
            raise ValueError(f"s3 backend option {name!r} given twice")
        options[name] = value
    values: dict[str, object] = {"endpoint": f"{url.scheme}://{url.netloc}",
                                 "min_part_size": min_part_size}
    if "region" in options:
        if not options["region"]:
            raise ValueError("s3 backend option region= must not be empty")
        values["region"] = options["region"]
    if "addressing" in options:
        if options["addressing"] not in ("path", "virtual", "auto"):
            raise ValueError(f"s3 backend option addressing={options['addressing']!r} must "
                             f"be path, virtual or auto")
        values["addressing"] = options["addressing"]
    if "bucket" in options:
        if not options["bucket"] or "/" in options["bucket"]:
            raise ValueError(f"s3 backend option bucket={options['bucket']!r} must be an "
                             f"upstream bucket name")
        values["bucket"] = options["bucket"]
    if "prefix" in options:
        if "bucket" not in options:
            raise ValueError("s3 backend option prefix= needs bucket= (a prefix inside the "
                             "one upstream bucket)")
        values["prefix"] = options["prefix"]
    if "part_size" in options:
        values["part_size"] = _int("part_size", options["part_size"], MIN_UPSTREAM_PART)
    for name in ("concurrency", "max_connections", "retries", "list_concurrency"):
        if name in options:
            values[name] = _int(name, options[name], 1)
    for name in ("connect_timeout", "read_timeout"):
        if name in options:
            values[name] = _seconds(name, options[name])
    access, secret = env.get(ACCESS_KEY_ENV), env.get(SECRET_KEY_ENV)
    if bool(access) != bool(secret):
        raise ValueError(f"set both {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}, or neither "
                         f"(to use the standard AWS credential chain)")
    if access and secret:
        values["access_key"], values["secret_key"] = access, secret
    return S3Config(**values)  # type: ignore[arg-type]
