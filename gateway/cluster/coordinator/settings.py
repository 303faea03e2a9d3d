"""How a member reaches etcd: ``--coordinator etcd://HOST:PORT[,HOST:PORT...]`` and the
options etcd clients take (TLS files, user and password), the key prefix and the lease
TTL."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from pathlib import Path

SCHEMES = ("etcd", "etcds")
DEFAULT_PORT = 2379
DEFAULT_PREFIX = "/squall/"
DEFAULT_LEASE_TTL_S = 5
#: the lease TTLs a member accepts, in seconds
MIN_LEASE_TTL_S, MAX_LEASE_TTL_S = 2, 300


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    endpoints: tuple[tuple[str, int], ...]
    #: every key Squall keeps in etcd starts with it (several clusters may share one etcd)
    prefix: str = DEFAULT_PREFIX
    lease_ttl_s: int = DEFAULT_LEASE_TTL_S
    tls: bool = False
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    user: str | None = None
    password: str | None = None

    @property
    def url(self) -> str:
        scheme = "etcds" if self.tls else "etcd"
        return f"{scheme}://" + ",".join(f"{h}:{p}" for h, p in self.endpoints)


def parse_endpoints(url: str) -> tuple[bool, tuple[tuple[str, int], ...]]:
    """``etcd://H:P,H:P`` (``etcds://`` for TLS) as (tls, endpoints); ValueError with a
    message a user can act on."""
    scheme, sep, rest = url.strip().partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise ValueError(f"--coordinator {url!r} must look like etcd://HOST:PORT[,HOST:PORT...] "
                         "(etcds:// for TLS)")
    endpoints = []
    for part in rest.rstrip("/").split(","):
        if not part.strip():
            continue
        parsed = urllib.parse.urlsplit("//" + part.strip())
        try:
            port = parsed.port or DEFAULT_PORT
        except ValueError:
            raise ValueError(f"--coordinator {url!r}: bad port in {part!r}") from None
        if not parsed.hostname or parsed.path or parsed.username:
            raise ValueError(f"--coordinator {url!r}: {part!r} is not HOST:PORT")
        endpoints.append((parsed.hostname, port))
    if not endpoints:
        raise ValueError(f"--coordinator {url!r} names no endpoint")
    return scheme.lower() == "etcds", tuple(endpoints)


def coordinator_settings(url: str, *, prefix: str = DEFAULT_PREFIX,
                         lease_ttl_s: int = DEFAULT_LEASE_TTL_S,
                         ca: Path | None = None, cert: Path | None = None,
                         key: Path | None = None, user: str | None = None,
                         password: str | None = None) -> CoordinatorSettings:
    """The checked settings; ValueError for an inconsistent combination."""
    tls, endpoints = parse_endpoints(url)
    tls = tls or ca is not None or cert is not None
    if (cert is None) != (key is None):
        raise ValueError("--etcd-cert and --etcd-key go together (a client certificate)")
    if (user is None) != (password is None):
        raise ValueError("--etcd-user and --etcd-password go together")
    if not MIN_LEASE_TTL_S <= lease_ttl_s <= MAX_LEASE_TTL_S:
        raise ValueError(f"--lease-ttl must be between {MIN_LEASE_TTL_S} and "
                         f"{MAX_LEASE_TTL_S} seconds, not {lease_ttl_s}")
    if not prefix.startswith("/") or not prefix.endswith("/"):
        raise ValueError(f"--coordinator-prefix {prefix!r} must start and end with '/'")
    return CoordinatorSettings(endpoints, prefix, lease_ttl_s, tls, ca, cert, key, user,
                               password)
