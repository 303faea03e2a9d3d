"""Where the mount sends each object request: straight to the key's owner when the
endpoint is a member of a Squall cluster, else to the endpoint.

At mount time the ring is read from the endpoint (``GET /_squall/cluster``, signed);
:func:`owner_router` decides whether to route (``--route-to-owners``, automatic by
default; docs/fuse-mount.md, "Clusters: requests go to the keys' owners"), and
:class:`OwnerRouter` answers the owner of each key from its newest copy of the ring,
read again in the background every :data:`REFRESH_INTERVAL` seconds. A request routed by an older copy still works:
the member that receives it relays it to the owner.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable

from gateway.client.failures import ClientFailure, reason
from gateway.client.signing import signed_headers
from gateway.client.tls import client_context
from gateway.cluster.client import CLUSTER_PATH, fetch_ring, member_hosts
from gateway.cluster.ring import owner_index
from gateway.fuse_mount.settings import MountSettings

log = logging.getLogger("gateway.fuse_mount")

#: seconds between two reads of the ring while the mount runs
REFRESH_INTERVAL = 30.0
#: seconds one TCP connection to a member may take before it counts as unreachable
PROBE_TIMEOUT = 1.0
#: a failed request to an owner brings the next read of the ring forward, at most this often
_SOONEST = 2.0

#: The hosts of the ring, sorted, and those of them this machine cannot reach.
_State = tuple[tuple[str, ...], frozenset[str]]


class OwnerRouter:
    """The base URL each object request goes to: its key's owner among the ring's hosts
    (the endpoint for a host this machine could not reach). Thread-safe; :meth:`start`
    reads the ring again every ``interval`` seconds in a daemon thread."""

    def __init__(self, endpoint: str, hosts: Iterable[str],
                 read: Callable[[], tuple[str, ...]], *,
                 interval: float = REFRESH_INTERVAL, probe_timeout: float = PROBE_TIMEOUT,
                 unreachable: Iterable[str] = ()) -> None:
        """``read``: the ring's hosts, read again (OSError or ValueError when it cannot
        be); ``unreachable``: hosts of ``hosts`` to leave to the endpoint."""
        self.endpoint = endpoint.rstrip("/")
        self._state: _State = (tuple(sorted(hosts)), frozenset(unreachable))
        self._read = read
        self._interval = interval
        self._probe_timeout = probe_timeout
        self._wake = threading.Event()
        self._stopped = False
        self._last_read = time.monotonic()
        self._thread: threading.Thread | None = None

    @property
    def hosts(self) -> tuple[str, ...]:
        """The ring's hosts as last read."""
        return self._state[0]

    def owner(self, bucket: str, key: str) -> str:
        """The base URL (``scheme://host:port``) to send a request for ``key`` to."""
        hosts, away = self._state
        if not hosts:
            return self.endpoint
        url = hosts[owner_index(hosts, bucket, key)]
        return self.endpoint if url in away else url

    def refresh(self) -> None:
        """Read the ring again; on failure keep the last one (logged at debug). Hosts new
        in it, and those not reachable so far, are probed (their keys go to the endpoint
        while they cannot be reached)."""
        self._last_read = time.monotonic()
        try:
            hosts = tuple(sorted(self._read()))
        except (OSError, ValueError) as exc:
            log.debug("reading the cluster ring again failed (%s): keeping the last one",
                      reason(exc))
            return
        old, away = self._state
        if hosts == old and not away:
            return
        suspects = [h for h in hosts if h not in old or h in away]
        failed = unreachable(suspects, self._probe_timeout)
        for host in sorted(failed.keys() - away):
            log.warning("cluster member %s is not reachable from here (%s): its keys go "
                        "through %s", host, failed[host], self.endpoint)
        for host in sorted(away & (set(hosts) - failed.keys())):
            log.info("cluster member %s is reachable again: its keys go to it", host)
        if hosts != old:
            log.info("cluster ring read again: %d members", len(hosts))
        self._state = (hosts, frozenset(failed))

    def suspect(self) -> None:
        """A request to an owner failed to connect: read the ring again soon (it may have
        left the cluster), unless that was done just now."""
        if time.monotonic() - self._last_read >= _SOONEST:
            self._wake.set()

    def start(self) -> None:
        """Read the ring again every ``interval`` seconds (and soon after :meth:`suspect`)
        in a daemon thread, until :meth:`stop`."""
        if self._thread is None:
            log.info("routing object requests to their owners among the %d members of the "
                     "cluster (ring read again every %g s)", len(self.hosts), self._interval)
            self._thread = threading.Thread(target=self._loop, name="squall-ring",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._stopped:
                return
            self.refresh()


def owner_router(settings: MountSettings) -> OwnerRouter | None:
    """The router of the mount's object requests, or None when every request goes to the
    endpoint: ``--no-route-to-owners``, a gateway without peers, or (automatic mode) a
    ring that cannot be read or a member this machine cannot reach, each logged as one
    warning. With ``--route-to-owners`` a ring that cannot be read is a ClientFailure."""
    explicit = settings.route_to_owners
    if explicit is False:
        return None
    read = ring_reader(settings)
    url = settings.endpoint + CLUSTER_PATH
    try:
        hosts = read()
    except (OSError, ValueError) as exc:  # unreachable, refused (403), not a ring
        if explicit:
            raise ClientFailure(f"--route-to-owners: cannot read the cluster ring from "
                                f"{url}: {reason(exc)}") from exc
        log.warning("not routing requests to the keys' owners: cannot read the cluster "
                    "ring from %s (%s); every request goes to %s", url, reason(exc),
                    settings.endpoint)
        return None
    if not hosts:
        log.debug("%s is a gateway without peers: every request goes to it", url)
        return None
    if explicit is None:
        failed = unreachable(hosts)
        if failed:
            host = min(failed)
            log.warning("not routing requests to the keys' owners: cluster member %s is "
                        "not reachable from here (%s); every request goes to %s", host,
                        failed[host], settings.endpoint)
            return None
    return OwnerRouter(settings.endpoint, hosts, read)


def ring_reader(settings: MountSettings) -> Callable[[], tuple[str, ...]]:
    """A function reading the hosts of the endpoint's ring, signed with the mount's
    credentials (OSError or ValueError when it cannot)."""
    url = settings.endpoint + CLUSTER_PATH
    context: ssl.SSLContext | None = None
    if url.startswith("https://"):
        context = client_context(settings.ca_bundle, "--ca-bundle")

    def read() -> tuple[str, ...]:
        headers = signed_headers(url, settings.credentials, region=settings.region)
        return member_hosts(fetch_ring(settings.endpoint, context=context, headers=headers))

    return read


def unreachable(urls: Iterable[str], timeout: float = PROBE_TIMEOUT) -> dict[str, str]:
    """The URLs of ``urls`` that one TCP connection does not reach within ``timeout``
    seconds, each with why; all probed at once (a name that does not resolve in time
    counts as unreachable too)."""
    found: dict[str, str] = {}

    def probe(url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            with socket.create_connection((parts.hostname or "", port), timeout=timeout):
                found[url] = ""
        except (OSError, ValueError) as exc:
            found[url] = reason(exc)

    threads = {url: threading.Thread(target=probe, args=(url,), daemon=True,
                                     name="squall-probe") for url in urls}
    for thread in threads.values():
        thread.start()
    deadline = time.monotonic() + timeout + 0.5
    for thread in threads.values():
        thread.join(max(0.0, deadline - time.monotonic()))
    return {url: found.get(url, f"no connection within {timeout:g} s")
            for url in threads if found.get(url) != ""}
