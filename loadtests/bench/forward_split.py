"""The cost of forwarding, split by member: ``python -m loadtests.bench.forward_split``.

Two members (an etcd, one shared posix directory); every key used is owned by the first.
16 clients send 4 KiB GETs of 64 keys, then PUTs of new keys, for ``--duration`` each:
straight to the owner, then all through the other member, twice in turn. Each member's
CPU (user + system, ``/proc``) is read around each run (which starts once both have
flushed what the previous one wrote), and printed in microseconds per
request: what the owner pays for a request sent to it directly or forwarded to it, and
what the forwarding member pays.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from gateway.client.credentials import credentials_from_env
from gateway.client.sigv4 import Signer
from gateway.cluster.ring import owner_index
from loadtests.bench.cluster import start_members
from loadtests.bench.cpu import cpu_seconds
from loadtests.bench.server import (
    ServerProcess,
    coordinator_url,
    etcd_server,
    squall_credentials,
    wait_settled,
)
from loadtests.bench.targets import S3Target

BUCKET = "split-bench"
CLIENTS = 16
SIZE = 4096


def owned_keys(urls: Sequence[str], prefix: str) -> itertools.filterfalse[str]:
    """Keys (``prefix`` and a number) the first member owns, without end."""
    return itertools.filterfalse(lambda k: owner_index(urls, BUCKET, k) != 0,
                                 (f"{prefix}{i}" for i in itertools.count()))


async def run(servers: Sequence[ServerProcess], signer: Signer, kind: str, via: int,
              duration: float) -> str:
    urls = [s.endpoint for s in servers]
    target = S3Target(urls[via], BUCKET, signer, clients=CLIENTS)
    data = os.urandom(SIZE)
    reads = list(itertools.islice(owned_keys(urls, "read-"), 64))
    writes = owned_keys(urls, f"write-{via}-{time.monotonic_ns()}-")
    try:
        await target.create_bucket()
        for key in reads:
            await target.put(key, data)
        for server in servers:  # the previous run's write-back is not counted in this one
            await asyncio.to_thread(wait_settled, server.endpoint)
        ops = 0
        end = time.perf_counter() + duration
        before = [cpu_seconds(s.pid) for s in servers if s.pid is not None]

        async def client(n: int) -> None:
            nonlocal ops
            for i in itertools.count(n, CLIENTS):
                if time.perf_counter() >= end:
                    return
                if kind == "get":
                    await target.get(reads[i % len(reads)])
                else:
                    await target.put(next(writes), data)
                ops += 1
        await asyncio.gather(*(client(n) for n in range(CLIENTS)))
        after = [cpu_seconds(s.pid) for s in servers if s.pid is not None]
    finally:
        await target.close()
    owner, other = ((a - b) / max(ops, 1) * 1e6 for a, b in zip(after, before, strict=True))
    sent = "the owner" if via == 0 else "the other member"
    return (f"| {kind.upper()} 4KiB x{CLIENTS} | {sent} | {ops / duration:.0f} | "
            f"{owner:.0f} | {other:.0f} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.forward_split",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per run")
    parser.add_argument("--server-args", default="--dirty-replicas 1",
                        help="extra 'squall serve' arguments for both members")
    args = parser.parse_args(argv)
    env = {**squall_credentials("SPLIT"), "SQUALL_CLUSTER_SECRET": secrets.token_hex(16)}
    signer = Signer(credentials_from_env(env))
    lines = [("| workload | sent to | ops/s | owner's CPU per op (us) | "
             "other member's CPU per op (us) |"), "|---|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="squall-split-bench-") as tmp, \
            etcd_server(Path(tmp)) as etcd:
        servers = start_members(2, Path(tmp), env, args.server_args.split(),
                                coordinator_url(etcd))
        try:
            for kind in ("get", "put"):
                for via in (0, 1, 0, 1):
                    print(f"{kind} via member {via}", file=sys.stderr)
                    lines.append(asyncio.run(run(servers, signer, kind, via, args.duration)))
        finally:
            for server in servers:
                server.stop()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
