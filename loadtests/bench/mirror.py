"""Mirrored write-back benchmark: acknowledgement latency and PUT throughput, R=1 vs R=2.

``python -m loadtests.bench.mirror`` starts an etcd and, for each ``--dirty-replicas``
value, a local cluster of ``--members`` ``squall serve`` processes coordinated by it over
one shared posix directory, and
runs PUT workloads sent straight to each key's owner (so forwarding is not measured):
one client alone (acknowledgement latency, p50/p99) and ``--clients`` at once
(throughput). By default the backend is throttled so that the writes stay in the caches
(with a fast backend they go around the cache, clean, and nothing is mirrored).
Everything shares this machine's cores: the numbers compare R values on one machine
(docs/benchmarks.md), not a cluster of hosts.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from backends.core.units import format_size, parse_duration, parse_size
from gateway.client.credentials import credentials_from_env
from gateway.client.sigv4 import Signer
from loadtests.bench.cluster import RoutedTarget, members_cpu_seconds, start_members
from loadtests.bench.engine import Measurement, run_workload
from loadtests.bench.server import coordinator_url, etcd_server, squall_credentials
from loadtests.bench.workloads import Workload

DIRTY_ARGS = "--backend-bandwidth 5MB/s --inactivity-delay 3600"


async def _measure(endpoints: Sequence[str], signer: Signer, wl: Workload,
                   run: str) -> Measurement:
    target = RoutedTarget(endpoints, "mirror-bench", signer, clients=wl.clients,
                          policy="owner")
    try:
        await target.create_bucket()
        return await run_workload(target, wl, run)
    finally:
        await target.close()


def run(replicas: Sequence[int], members: int, wls: Sequence[Workload],
        extra: Sequence[str], work: Path) -> list[tuple[int, Workload, Measurement, float]]:
    env = {**squall_credentials("MIRROR"), "SQUALL_CLUSTER_SECRET": secrets.token_hex(16)}
    signer = Signer(credentials_from_env(env))
    rows = []
    with etcd_server(work) as etcd:
        for r in replicas:
            (work / f"r{r}").mkdir()
            rows += _run(r, members, wls, [*extra, "--dirty-replicas", str(r)],
                         work / f"r{r}", env, signer, coordinator_url(etcd))
    return rows


def _run(r: int, members: int, wls: Sequence[Workload], extra: Sequence[str], work: Path,
         env: dict[str, str], signer: Signer, coordinator: str
         ) -> list[tuple[int, Workload, Measurement, float]]:
    rows = []
    servers = start_members(members, work, env, extra, coordinator)
    try:
        endpoints = [s.endpoint for s in servers]
        for wl in wls:
            print(f"R={r}: {wl.title}", file=sys.stderr)
            before = members_cpu_seconds([s.pid for s in servers])
            result = asyncio.run(_measure(endpoints, signer, wl, f"r{r}-{wl.key}"))
            used = members_cpu_seconds([s.pid for s in servers]) - before
            rows.append((r, wl, result, used))
    finally:
        for server in servers:
            server.stop()
    return rows


def table(rows: Sequence[tuple[int, Workload, Measurement, float]]) -> str:
    head = ("| R | workload | PUT/s | MiB/s | p50 (ms) | p99 (ms) "
            "| members' CPU per PUT (ms) | errors |")
    lines = [head, "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r, wl, m, cpu in rows:
        per_op = cpu / m.ops * 1000 if m.ops else 0.0
        lines.append(f"| {r} | {wl.title} | {m.ops_s:.0f} | {m.mib_s:.1f} | {m.p50_ms:.2f} "
                     f"| {m.p99_ms:.2f} | {per_op:.2f} | {m.errors} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.mirror",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="1,2", help="--dirty-replicas values")
    parser.add_argument("--members", type=int, default=3, help="cluster members")
    parser.add_argument("--sizes", default="4KiB,1MiB", help="object sizes")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--count", type=int, default=1000, help="PUTs per run at most")
    parser.add_argument("--duration", default="5s", help="time per run at most")
    parser.add_argument("--server-args", default=DIRTY_ARGS,
                        help="extra 'squall serve' arguments for every member (default: a "
                             "throttled backend, so writes stay in the caches, mirrored)")
    args = parser.parse_args(argv)
    replicas = sorted({int(r) for r in args.replicas.split(",")})
    duration = parse_duration(args.duration)
    wls = []
    for size in (parse_size(s) for s in args.sizes.split(",")):
        for clients in (1, args.clients):
            wls.append(Workload("put", size, clients, args.count, duration,
                                unit="ops/s" if size < (1 << 20) else "MiB/s"))
    with tempfile.TemporaryDirectory(prefix="squall-mirror-bench-") as tmp:
        rows = run(replicas, args.members, wls, args.server_args.split(), Path(tmp))
    print(f"PUTs straight to the owner, {args.members} members on one machine, objects of "
          f"{', '.join(format_size(w.size) for w in wls[::2])}\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
