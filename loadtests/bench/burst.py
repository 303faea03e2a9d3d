"""Checkpoint burst: N clients each write one object at once, then the cache drains.

``python -m loadtests.bench.burst`` runs the same burst against several gateway
configurations started side by side in one run — by default the seed's static-slow (no
cache, throttled backend), static-fast (no cache, unthrottled backend) and adaptive (the
cache tier in front of the throttled backend) — and prints burst completion time,
client-perceived throughput, the time until the gateway reports no dirty bytes (everything
on the backend), and each configuration's burst time relative to static-fast.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from backends.core.units import format_size, parse_size
from gateway.client.credentials import credentials_from_env
from gateway.client.signing import status_headers
from gateway.client.sigv4 import Signer
from loadtests.bench.server import squall_credentials, squall_server
from loadtests.bench.targets import S3Target

DEFAULT_CONFIGS = (
    "static-slow=--cache-size 0 --backend-bandwidth {rate}",
    "static-fast=--cache-size 0",
    "adaptive=--cache-size {cache} --backend-bandwidth {rate}",
)


@dataclass(frozen=True, slots=True)
class BurstResult:
    name: str
    burst_s: float
    drain_s: float
    total_bytes: int

    @property
    def mib_per_s(self) -> float:
        return self.total_bytes / 2**20 / self.burst_s


async def run_burst(endpoint: str, signer: Signer, *, clients: int, size: int) -> float:
    """Seconds until every client's PUT is acknowledged (all start together)."""
    target = S3Target(endpoint, "burst", signer, clients=clients)
    try:
        await target.create_bucket()
        data = os.urandom(size)
        started = time.perf_counter()
        await asyncio.gather(*(target.put(f"rank-{i:04d}/ckpt", data) for i in range(clients)))
        return time.perf_counter() - started
    finally:
        await target.close()


def drain(endpoint: str, poll_s: float = 0.05) -> float:
    """Seconds until the gateway reports no dirty bytes (polling /_squall/status)."""
    started = time.perf_counter()
    url = f"{endpoint}/_squall/status"
    while httpx.get(url, headers=status_headers(url)).json().get("dirty_bytes", 0):
        time.sleep(poll_s)
    return time.perf_counter() - started


def measure(name: str, args: Sequence[str], *, clients: int, size: int,
            work: Path) -> BurstResult:
    env = squall_credentials("BURST")
    with squall_server(name, args, work, env) as server:
        signer = Signer(credentials_from_env(env))
        burst_s = asyncio.run(run_burst(server.endpoint, signer, clients=clients, size=size))
        drain_s = drain(server.endpoint)
    return BurstResult(name, burst_s, drain_s, clients * size)


def table(results: Sequence[BurstResult], *, baseline: str) -> str:
    base = next((r for r in results if r.name == baseline), None)
    header = ("| configuration | burst time (s) | client MiB/s | burst + drain (s) "
              f"| burst time / {baseline} |")
    rows = [header, "|---|---:|---:|---:|---:|"]
    for r in results:
        ratio = f"{r.burst_s / base.burst_s:.2f}x" if base else "-"
        rows.append(f"| {r.name} | {r.burst_s:.2f} | {r.mib_per_s:.0f} | "
                    f"{r.burst_s + r.drain_s:.2f} | {ratio} |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.burst",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--size", default="64MiB", help="object per client")
    parser.add_argument("--rate", default="20MiB/s", help="backend throttle")
    parser.add_argument("--cache", default="2GiB", help="cache size of 'adaptive'")
    parser.add_argument("--config", action="append", metavar="NAME=ARGS",
                        help="configuration (repeatable); {rate} and {cache} are filled in")
    parser.add_argument("--baseline", default="static-fast")
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    configs = args.config or list(DEFAULT_CONFIGS)
    results = []
    with tempfile.TemporaryDirectory(prefix="squall-burst-") as tmp:
        for spec in configs:
            name, _, extra = spec.partition("=")
            extra = extra.format(rate=args.rate, cache=args.cache)
            print(f"{name}: {extra}", file=sys.stderr)
            results.append(measure(name, extra.split(), clients=args.clients, size=size,
                                   work=Path(tmp)))
    print(f"{args.clients} clients x {format_size(size)} at once; backend throttle "
          f"{args.rate} where set; every PUT fsynced before it is acknowledged\n")
    print(table(results, baseline=args.baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
