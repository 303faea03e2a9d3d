"""Every route a request takes to a backend, as a fixture: throttled (bandwidth,
operations), the cache admitting it or bypassed (``--cache-size 0``), each backend,
``--workers 2`` (requests handed to the key's worker) and a cluster (requests forwarded
to the key's owner)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.gateway.cluster.conftest import Cluster
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


@dataclass
class Route:
    """Where the clients send their requests, and a key that takes the route."""

    endpoint: str
    key: Callable[[str, str], str]  # (bucket, name) -> a key


def _single(tmp_path: Path, args: list[str], env: dict[str, str] | None = None
            ) -> Iterator[Route]:
    gateway = SquallProcess(tmp_path / "gw", args, env=env).start()
    try:
        yield Route(gateway.endpoint, lambda _bucket, name: name)
    finally:
        gateway.stop()


ROUTES: dict[str, list[str]] = {
    "throttled-bandwidth-no-cache": ["--cache-size", "0", "--backend-bandwidth", "40MiB/s"],
    "throttled-iops-cache": ["--backend-iops", "50"],
    "cache-admitted": ["--cache-admission", "cache", "--backend-bandwidth", "100MiB/s"],
    "cache-bypassed": ["--cache-size", "0"],
    "workers": ["--workers", "2", "--backend-bandwidth", "100MiB/s"],
}


@pytest.fixture(name="route",
                params=[*ROUTES, "blobseer-throttled", "s3-throttled", "cluster-forwarded"])
def route_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Route]:
    name = request.param
    if name in ROUTES:
        yield from _single(tmp_path, ROUTES[name])
    elif name == "blobseer-throttled":
        disks = ",".join(str(tmp_path / f"disk{i}") for i in range(3))
        yield from _single(tmp_path, ["--backend", f"blobseer_like:{disks}",
                                      "--backend-bandwidth", "40MiB/s"])
    elif name == "s3-throttled":
        upstream = SquallProcess(tmp_path / "upstream", ["--cache-size", "0"]).start()
        try:
            yield from _single(
                tmp_path, ["--backend", f"s3:{upstream.endpoint}", "--cache-size", "0",
                           "--backend-bandwidth", "40MiB/s"],
                env={"SQUALL_UPSTREAM_ACCESS_KEY": ACCESS_KEY,
                     "SQUALL_UPSTREAM_SECRET_KEY": SECRET_KEY})
        finally:
            upstream.stop()
    else:
        (tmp_path / "cluster").mkdir()
        cluster = Cluster(tmp_path / "cluster", size=2,
                          args=["--backend-bandwidth", "40MiB/s"]).start()
        try:  # every key is owned by member 1 and sent to member 0
            yield Route(cluster.nodes[0].endpoint,
                        lambda bucket, name: cluster.key_owned_by(1, bucket, name))
        finally:
            cluster.stop()
