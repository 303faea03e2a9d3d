"""Squall as a burst buffer in front of a slow S3 service, against that service directly.

``python -m loadtests.bench.upstream`` starts an upstream S3 server (a Squall on the posix
backend, no cache, its backend throttled to a cloud-like ``--rate``) and a front Squall
whose backend is that upstream (``--backend s3:URL``) with its cache tier. N clients each
write one object at once, then read it back, first straight to the upstream, then through
the front; it prints throughput and the ratios (the burst-buffer seed measured 16.8x for
writes and 10.47x for reads in front of Amazon S3).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from backends.core.units import format_size, parse_size
from gateway.client.credentials import credentials_from_env
from gateway.client.sigv4 import Signer
from loadtests.bench.server import squall_credentials, squall_server
from loadtests.bench.targets import S3Target


async def write_then_read(endpoint: str, signer: Signer, *, clients: int,
                          size: int) -> tuple[float, float]:
    """(write MiB/s, read MiB/s) of ``clients`` objects written at once, then read."""
    target = S3Target(endpoint, "upstream-bench", signer, clients=clients)
    try:
        await target.create_bucket()
        data = os.urandom(size)
        keys = [f"rank-{i:04d}" for i in range(clients)]
        started = time.perf_counter()
        await asyncio.gather(*(target.put(key, data) for key in keys))
        write_s = time.perf_counter() - started
        started = time.perf_counter()
        sizes = await asyncio.gather(*(target.get(key) for key in keys))
        read_s = time.perf_counter() - started
        if any(n != size for n in sizes):
            raise RuntimeError(f"short read: {sizes}")
        total = clients * size / 2**20
        return total / write_s, total / read_s
    finally:
        await target.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.upstream",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--size", default="64MiB")
    parser.add_argument("--rate", default="30MiB/s", help="the upstream's throttle")
    parser.add_argument("--cache", default="2GiB", help="the front gateway's cache")
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    upstream_env = squall_credentials("UP")
    front_env = {**squall_credentials("FRONT"),
                 "SQUALL_UPSTREAM_ACCESS_KEY": upstream_env["SQUALL_ACCESS_KEY"],
                 "SQUALL_UPSTREAM_SECRET_KEY": upstream_env["SQUALL_SECRET_KEY"]}
    with tempfile.TemporaryDirectory(prefix="squall-upstream-") as tmp:
        work = Path(tmp)
        upstream = squall_server(
            "upstream", ["--cache-size", "0", "--backend-bandwidth", args.rate], work,
            upstream_env)
        with upstream:
            direct = asyncio.run(write_then_read(
                upstream.endpoint, Signer(credentials_from_env(upstream_env)),
                clients=args.clients, size=size))
            front = squall_server(
                "front", ["--cache-size", args.cache, "--backend", f"s3:{upstream.endpoint}"],
                work, front_env)
            with front:
                buffered = asyncio.run(write_then_read(
                    front.endpoint, Signer(credentials_from_env(front_env)),
                    clients=args.clients, size=size))
    print(f"{args.clients} clients x {format_size(size)}: write at once, then read back; "
          f"upstream throttled to {args.rate}; every PUT fsynced before it is acknowledged\n")
    print("| path | write MiB/s | read MiB/s |")
    print("|---|---:|---:|")
    print(f"| straight to the upstream | {direct[0]:.0f} | {direct[1]:.0f} |")
    print(f"| through Squall (cache) | {buffered[0]:.0f} | {buffered[1]:.0f} |")
    print(f"| ratio | {buffered[0] / direct[0]:.1f}x | {buffered[1] / direct[1]:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
