"""Client-side routing: send each request straight to the key's owner.

``GET /_squall/cluster`` on any member returns the ring; :func:`owner_url` computes the
owner of a key from it exactly as the members do (:mod:`gateway.cluster.ring`). The ring
changes while a coordinated cluster runs: a request routed by an older copy still works
(the member forwards it), so read it again now and then. Requests
sent elsewhere still work (the member forwards them), one hop slower. Clients must be
able to reach the member URLs (inside the cluster network). Standard library only.

    ring = fetch_ring("http://squall-0.squall-headless:9000")
    url = owner_url(ring, "bucket", "path/to/key")

    s3 = boto3.client("s3", endpoint_url=..., config=Config(s3={"addressing_style": "path"}))
    route_to_owners(s3, ring)  # every object request of this client goes to the owner

A client that reads the ring again now and then passes ``route_to_owners`` a function
giving the owner's URL from its newest copy instead of the ring itself.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gateway.cluster.ring import HASH_NAME, owner_index

CLUSTER_PATH = "/_squall/cluster"


def fetch_ring(endpoint: str, *, timeout: float = 5.0,
               context: ssl.SSLContext | None = None,
               headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ring as a member at ``endpoint`` reports it (members empty: no cluster);
    ``context`` verifies an https:// endpoint; ``headers`` authorize the read (the
    status views are closed by default: gateway.client.signing.status_headers)."""
    request = urllib.request.Request(endpoint.rstrip("/") + CLUSTER_PATH,
                                     headers=dict(headers or {}))
    with urllib.request.urlopen(request, timeout=timeout, context=context) as r:
        ring: dict[str, Any] = json.loads(r.read())
    member_hosts(ring)  # ValueError for an answer of another shape
    if ring.get("members") and ring.get("hash") != HASH_NAME:
        raise ValueError(f"unknown ring hash {ring.get('hash')!r} (this client knows "
                         f"{HASH_NAME!r})")
    return ring


def member_hosts(ring: Mapping[str, Any]) -> tuple[str, ...]:
    """The base URLs of the ring's hosts, sorted (one per host running workers); empty
    for a gateway without peers. ValueError for an answer of another shape."""
    try:
        members = ring.get("members") or []
        if not isinstance(members, list):
            raise TypeError(f"members: {type(members).__name__}")
        return tuple(sorted({str(m["url"]) for m in members}))
    except (AttributeError, KeyError, TypeError) as exc:
        raise ValueError(f"not a cluster ring ({type(exc).__name__}: {exc})") from None


def wait_members(endpoints: Sequence[str], *, timeout: float = 60.0,
                 context: ssl.SSLContext | None = None) -> None:
    """Return once every member at ``endpoints`` has the ring of exactly them, has handed
    its keys over and serves (its status views open to the caller); TimeoutError if
    that takes longer than ``timeout`` seconds. ``context`` verifies https://."""
    wanted = sorted(endpoints)
    deadline = time.monotonic() + timeout
    for endpoint in endpoints:
        while True:
            try:
                ring = fetch_ring(endpoint, timeout=2, context=context)
                hosts = sorted({str(m["url"]) for m in ring["members"]})
                if hosts == wanted and ring["serving"] and \
                        ring.get("handed_over") == ring["revision"]:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{endpoint} did not see the members {wanted} in time")
            time.sleep(0.1)


def owner_url(ring: Mapping[str, Any], bucket: str, key: str, *,
              default: str | None = None) -> str:
    """The base URL of the member owning ``(bucket, key)``: the host with the highest
    weight (a host running workers passes the request to the key's worker); ``default``
    (the endpoint the ring came from) for a gateway without peers."""
    hosts = member_hosts(ring)
    if not hosts:
        if default is None:
            raise ValueError("the ring has no members (a single gateway): pass default=")
        return default
    return hosts[owner_index(hosts, bucket, key)]


def route_to_owners(s3_client: Any,
                    ring: Mapping[str, Any] | Callable[[str, str], str]) -> None:
    """Make a boto3 S3 client (path-style addressing) send every object-level request to
    the key's owner; bucket-level requests keep the client's endpoint. ``ring``: the ring
    (:func:`fetch_ring`), or a function giving the base URL of the owner of
    ``(bucket, key)`` at the time of each request (a ring read again now and then)."""
    owner: Callable[[str, str], str]
    if callable(ring):
        owner = ring
    else:
        hosts = member_hosts(ring)
        if not hosts:
            return

        def owner(bucket: str, key: str) -> str:
            return hosts[owner_index(hosts, bucket, key)]

    def to_owner(request: Any, **_: Any) -> None:
        parts = urllib.parse.urlsplit(request.url)
        bucket, _, key = parts.path.lstrip("/").partition("/")
        if not bucket or not key:
            return
        target = urllib.parse.urlsplit(owner(urllib.parse.unquote(bucket),
                                             urllib.parse.unquote(key)))
        request.url = urllib.parse.urlunsplit(
            parts._replace(scheme=target.scheme, netloc=target.netloc))

    s3_client.meta.events.register("before-sign.s3", to_owner)
