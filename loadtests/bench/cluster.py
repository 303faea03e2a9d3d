"""Cluster benchmark: aggregate throughput with 1, 2, 3 replicas, and the cost of forwarding.

``python -m loadtests.bench.cluster`` starts an etcd and, for each replica count, that
many ``squall serve`` members on loopback ports coordinated by it over one shared posix
backend directory, and runs PUT and GET workloads (``loadtests.bench.engine``) with the
clients' requests routed three ways:

* ``any``: round robin over the members, as a ring-unaware client or load balancer does
  (a share (N-1)/N of the requests is forwarded by the member to the key's owner);
* ``owner``: straight to the key's owner (client-side routing, ``gateway.cluster.client``);
* ``non-owner``: always through a member that does not own the key (every request is
  forwarded): with ``owner``, the cost of forwarding.

Everything (members and client) shares this machine's cores; see docs/benchmarks.md.
With ``--hosts`` (root) each member runs in a cgroup of its own capped at ``--cpu-cap``
CPUs instead, for one gateway and 1, 2, 3 members (:mod:`loadtests.bench.hosts`).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import secrets
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from backends.core.units import format_size, parse_duration, parse_size
from gateway.client.credentials import credentials_from_env
from gateway.client.sigv4 import Signer
from gateway.cluster.client import wait_members
from gateway.cluster.ring import owner_index
from loadtests.bench.cpu import cpu_seconds
from loadtests.bench.engine import Measurement, run_workload
from loadtests.bench.server import (
    ServerProcess,
    coordinator_url,
    etcd_server,
    squall_credentials,
    squall_server,
)
from loadtests.bench.targets import S3Target
from loadtests.bench.workloads import Kind, Unit, Workload

POLICIES = ("any", "owner", "non-owner")


class RoutedTarget:
    """One bucket on a cluster; each key's requests go where ``policy`` says."""

    def __init__(self, endpoints: Sequence[str], bucket: str, signer: Signer, *,
                 clients: int, policy: str) -> None:
        self.name = f"{len(endpoints)} x squall ({policy})"
        self._urls = list(endpoints)
        self._targets = [S3Target(e, bucket, signer, clients=clients) for e in endpoints]
        self._policy = policy
        self._turn = itertools.count()

    def _pick(self, key: str) -> S3Target:
        n = len(self._targets)
        if n == 1:
            return self._targets[0]
        owner = owner_index(self._urls, self._targets[0].bucket, key)
        if self._policy == "owner":
            return self._targets[owner]
        if self._policy == "non-owner":
            return self._targets[(owner + 1) % n]
        return self._targets[next(self._turn) % n]

    async def create_bucket(self) -> None:
        await self._targets[0].create_bucket()

    async def put(self, key: str, data: bytes) -> None:
        await self._pick(key).put(key, data)

    async def get(self, key: str) -> int:
        return await self._pick(key).get(key)

    async def stat(self, key: str) -> int:
        return await self._pick(key).stat(key)

    async def delete(self, key: str) -> None:
        await self._pick(key).delete(key)

    async def close(self) -> None:
        for target in self._targets:
            await target.close()


@dataclass(frozen=True, slots=True)
class Row:
    replicas: int
    policy: str
    workload: Workload
    result: Measurement
    cpu_s: float  # CPU time all members used for the run (preparation and cleanup too)

    @property
    def value(self) -> float:
        return self.result.value(self.workload.unit)

    @property
    def cpu_ms_per_op(self) -> float:
        ops = self.result.ops + self.workload.objects
        return self.cpu_s / ops * 1000 if ops else 0.0


def members_cpu_seconds(pids: Sequence[int | None]) -> float:
    """User + system CPU time of the members and their workers (Linux /proc)."""
    return sum(cpu_seconds(pid) for pid in pids if pid is not None)


def start_members(count: int, work: Path, env: dict[str, str], extra: Sequence[str],
                  coordinator: str | None) -> list[ServerProcess]:
    """``count`` members over ``work/shared``, registered with ``coordinator`` under a
    prefix of their own (none for one member without it); returns once each sees them
    all, has handed its keys over and serves."""
    args = ["--backend", f"posix:{work / 'shared'}", *extra]
    if coordinator is not None:
        args += ["--coordinator", coordinator, "--coordinator-prefix",
                 f"/bench-{secrets.token_hex(6)}/"]
    servers = [squall_server(f"r{count}-node{i}-{secrets.token_hex(3)}", args, work, env)
               for i in range(count)]
    for server in servers:
        server.start()
    if coordinator is not None:
        wait_members([s.endpoint for s in servers])
    return servers


async def measure(endpoints: Sequence[str], signer: Signer, wl: Workload, policy: str,
                  run: str) -> Measurement:
    target = RoutedTarget(endpoints, "cluster-bench", signer, clients=wl.clients,
                          policy=policy)
    try:
        await target.create_bucket()
        return await run_workload(target, wl, run)
    finally:
        await target.close()


def workloads(sizes: Sequence[int], clients: int, count: int, duration: float
              ) -> list[Workload]:
    out = []
    for size in sizes:
        unit: Unit = "ops/s" if size < (1 << 20) else "MiB/s"
        kinds: tuple[Kind, ...] = ("put", "get")
        for kind in kinds:
            out.append(Workload(kind, size, clients, count, duration,
                                objects=32 if kind == "get" else 0, unit=unit))
    return out


def run_all(replicas: Sequence[int], wls: Sequence[Workload], latency_wls: Sequence[Workload],
            extra: Sequence[str], work: Path, coordinator: str) -> list[Row]:
    env = {**squall_credentials("CLUSTER"), "SQUALL_CLUSTER_SECRET": secrets.token_hex(16)}
    signer = Signer(credentials_from_env(env))
    rows: list[Row] = []
    for count in replicas:
        servers = start_members(count, work, env, extra, coordinator)
        try:
            endpoints = [s.endpoint for s in servers]
            policies = ("any",) if count == 1 else POLICIES
            for policy in policies:
                chosen = list(wls) + (list(latency_wls) if count == max(replicas) else [])
                for wl in chosen:
                    print(f"{count} replica(s), {policy}: {wl.title}", file=sys.stderr)
                    before = members_cpu_seconds([s.pid for s in servers])
                    result = asyncio.run(measure(endpoints, signer, wl, policy,
                                                 f"r{count}-{policy}-{wl.key}"))
                    used = members_cpu_seconds([s.pid for s in servers]) - before
                    if result.errors:
                        print(f"  {result.errors} errors, the first: {result.first_error}",
                              file=sys.stderr)
                        for server in servers:  # what the members said of it
                            print(server.log_tail(5), file=sys.stderr)
                    rows.append(Row(count, policy, wl, result, used))
        finally:
            for server in servers:
                server.stop()
    return rows


def _cell(row: Row | None) -> str:
    if row is None:
        return "-"
    errors = f" ({row.result.errors} errors)" if row.result.errors else ""
    return f"{row.value:.0f}{errors}"


def throughput_table(rows: Sequence[Row], wls: Sequence[Workload]) -> str:
    head = "| replicas | requests sent to | " + " | ".join(
        f"{w.title} ({w.unit})" for w in wls) + " |"
    lines = [head, "|---|---|" + "---:|" * len(wls)]
    seen = sorted({(r.replicas, r.policy) for r in rows if r.workload in wls},
                  key=lambda p: (p[0], POLICIES.index(p[1])))
    for replicas, policy in seen:
        if policy == "non-owner":
            continue
        cells = [_cell(next((r for r in rows if (r.replicas, r.policy, r.workload)
                             == (replicas, policy, w)), None)) for w in wls]
        name = "the one gateway" if replicas == 1 else (
            "round robin" if policy == "any" else "the owner")
        lines.append(f"| {replicas} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def forwarding_table(rows: Sequence[Row], wls: Sequence[Workload]) -> str:
    top = max(r.replicas for r in rows)
    head = ("| workload | straight to the owner | via a non-owner | cost "
            "| p50 owner / non-owner (ms) | members' CPU per op, owner / non-owner (ms) |")
    lines = [head, "|---|---:|---:|---:|---:|---:|"]
    for wl in wls:
        direct = next((r for r in rows if (r.replicas, r.policy, r.workload)
                       == (top, "owner", wl)), None)
        hop = next((r for r in rows if (r.replicas, r.policy, r.workload)
                    == (top, "non-owner", wl)), None)
        if direct is None or hop is None:
            continue
        cost = (1 - hop.value / direct.value) * 100 if direct.value else 0.0
        lines.append(f"| {wl.title} ({wl.unit}) | {_cell(direct)} | {_cell(hop)} | "
                     f"{cost:.0f}% | {direct.result.p50_ms:.1f} / {hop.result.p50_ms:.1f} | "
                     f"{direct.cpu_ms_per_op:.2f} / {hop.cpu_ms_per_op:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.cluster",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", default="1,2,3", help="replica counts to measure")
    parser.add_argument("--sizes", default="4KiB,4MiB", help="object sizes")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients in all")
    parser.add_argument("--count", type=int, default=2000,
                        help="operations per run at most")
    parser.add_argument("--duration", default="8s", help="time per run at most")
    parser.add_argument("--server-args", default="",
                        help="extra 'squall serve' arguments for every member")
    parser.add_argument("--hosts", action="store_true",
                        help="each member in a CPU-capped cgroup of its own (root): one "
                             "gateway, then --replicas members, on PUT 4 KiB x16, GET 4 KiB "
                             "x16 and PUT 4 MiB x8")
    parser.add_argument("--cpu-cap", type=float, default=0.4,
                        help="CPUs of each host with --hosts")
    parser.add_argument("--rate", type=float, default=10000.0,
                        help="requests/s the capacity line of --hosts is computed for")
    args = parser.parse_args(argv)
    replicas = sorted({int(r) for r in args.replicas.split(",")})
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    duration = parse_duration(args.duration)
    if args.hosts:
        return _hosts(args, replicas, duration)
    wls = workloads(sizes, args.clients, args.count, duration)
    latency_wls = workloads(sizes, 1, args.count, duration)
    with tempfile.TemporaryDirectory(prefix="squall-cluster-bench-") as tmp, \
            etcd_server(Path(tmp)) as etcd:
        rows = run_all(replicas, wls, latency_wls, args.server_args.split(), Path(tmp),
                       coordinator_url(etcd))
    print(f"Aggregate throughput, {args.clients} clients in all, objects of "
          f"{', '.join(format_size(s) for s in sizes)}; one shared posix backend\n")
    print(throughput_table(rows, wls))
    if max(replicas) > 1:
        print(f"\nForwarding cost with {max(replicas)} replicas (same workloads; and one "
              "client alone)\n")
        print(forwarding_table(rows, [*wls, *latency_wls]))
    return 0


def _hosts(args: argparse.Namespace, replicas: Sequence[int], duration: float) -> int:
    # imported here: loadtests.bench.hosts builds on this module
    from loadtests.bench import hosts
    from loadtests.bench.cgroups import cgroups_unavailable

    why = cgroups_unavailable()
    if why is not None:
        print(f"--hosts skipped: {why}", file=sys.stderr)
        return 0
    if args.cpu_cap <= 0:
        print("--cpu-cap must be a positive number of CPUs", file=sys.stderr)
        return 2
    wls = hosts.shapes(args.count, duration)
    with tempfile.TemporaryDirectory(prefix="squall-hosts-bench-") as tmp, \
            etcd_server(Path(tmp)) as etcd:
        rows = hosts.run_hosts(replicas, wls, args.server_args.split(), Path(tmp),
                               coordinator_url(etcd), args.cpu_cap)
    print(hosts.hosts_report(rows, wls, args.cpu_cap, args.rate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
