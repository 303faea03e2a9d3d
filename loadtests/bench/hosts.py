"""Scale-out the way operators do it: each member a "host" of its own (a CPU-capped
cgroup, :mod:`loadtests.bench.cgroups`), for one gateway without a cluster and for 1, 2
and 3 members (``python -m loadtests.bench.cluster --hosts``).

Three shapes, requests spread round robin over the members (a ring-unaware client or a
load balancer: (N-1)/N of them forwarded to their key's owner): PUT 4 KiB x16, GET 4 KiB
x16, PUT 4 MiB x8. Each timed phase starts once the members have flushed what the
previous run left and are quiet (:func:`settle`). For each run: the throughput, the
members' CPU microseconds per request (the cgroups' own accounting over the timed phase:
robust to other load on the machine),
and a capacity line: the hosts of ``cap`` CPUs that serve ``rate`` requests per second at
the measured cost.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.client.credentials import credentials_from_env
from gateway.client.sigv4 import Signer
from loadtests.bench.cgroups import CpuGroup
from loadtests.bench.cluster import RoutedTarget, start_members
from loadtests.bench.engine import Measurement, run_workload
from loadtests.bench.server import squall_credentials, wait_settled
from loadtests.bench.workloads import Workload

KIB, MIB = 1 << 10, 1 << 20
QUIET_TIMEOUT_S = 120.0
QUIET_WINDOW_S = 0.5


def shapes(count: int, duration: float) -> list[Workload]:
    """PUT 4 KiB x16, GET 4 KiB x16, PUT 4 MiB x8 (``count`` requests or ``duration``)."""
    return [Workload("put", 4 * KIB, 16, count, duration, unit="ops/s"),
            Workload("get", 4 * KIB, 16, count, duration, objects=64, unit="ops/s"),
            Workload("put", 4 * MIB, 8, count, duration, unit="MiB/s")]


@dataclass(frozen=True, slots=True)
class HostRow:
    setup: str  # "1 gateway" or "N members"
    members: int
    workload: Workload
    result: Measurement

    @property
    def cpu_us(self) -> float:
        """Members' CPU microseconds per request (all members together)."""
        return self.result.cpu_us_per_op or 0.0


def _cpu(groups: Sequence[CpuGroup]) -> float:
    """CPU seconds the groups have used together."""
    return sum(g.seconds() for g in groups)


def settle(endpoints: Sequence[str], groups: Sequence[CpuGroup], cap: float,
           timeout: float = QUIET_TIMEOUT_S) -> None:
    """Wait until the members have flushed everything and their CPU is quiet (under a
    tenth of their cap): what one run leaves behind (its flushes, its clean-up's
    deletes) is not counted in the next run's clock."""
    deadline = time.monotonic() + timeout
    for endpoint in endpoints:
        wait_settled(endpoint, timeout)
    while time.monotonic() < deadline:
        before = _cpu(groups)
        time.sleep(QUIET_WINDOW_S)
        if _cpu(groups) - before < 0.1 * cap * len(groups) * QUIET_WINDOW_S:
            return
    print(f"  the members were still busy after {timeout:.0f} s; measuring anyway",
          file=sys.stderr)


async def _measure(endpoints: Sequence[str], signer: Signer, wl: Workload, run: str,
                   groups: Sequence[CpuGroup], cap: float) -> Measurement:
    target = RoutedTarget(endpoints, "hosts-bench", signer, clients=wl.clients, policy="any")
    try:
        await target.create_bucket()
        quiet = (lambda: settle(endpoints, groups, cap), lambda: None)
        return await run_workload(target, wl, run,
                                  cpu=lambda: _cpu(groups), phase=quiet)
    finally:
        await target.close()


def run_hosts(members: Sequence[int], wls: Sequence[Workload], extra: Sequence[str],
              work: Path, coordinator: str, cap: float) -> list[HostRow]:
    """One capped gateway, then each member count of ``members``, each member capped."""
    env = {**squall_credentials("HOSTS"), "SQUALL_CLUSTER_SECRET": secrets.token_hex(16)}
    signer = Signer(credentials_from_env(env))
    rows: list[HostRow] = []
    for count in (0, *members):
        setup = "1 gateway" if count == 0 else f"{count} member{'s' * (count > 1)}"
        servers = start_members(max(count, 1), work, env, extra if count else [],
                                coordinator if count else None)
        groups = [CpuGroup(cap) for _ in servers]
        try:
            for server, group in zip(servers, groups, strict=True):
                assert server.pid is not None
                group.add(server.pid)
            endpoints = [s.endpoint for s in servers]
            for wl in wls:
                print(f"{setup}, {cap} CPU each: {wl.title}", file=sys.stderr)
                result = asyncio.run(_measure(endpoints, signer, wl,
                                              f"h{count}-{wl.key}", groups, cap))
                if result.errors:
                    print(f"  {result.errors} errors, the first: {result.first_error}",
                          file=sys.stderr)
                rows.append(HostRow(setup, max(count, 1), wl, result))
        finally:
            for server in servers:
                server.stop()
            for group in groups:
                group.close()
    return rows


def _find(rows: Sequence[HostRow], setup: str, wl: Workload) -> HostRow | None:
    return next((r for r in rows if r.setup == setup and r.workload == wl), None)


def _table(title: str, rows: Sequence[HostRow], wls: Sequence[Workload],
           cell: Callable[[HostRow, Workload], str], *, units: bool = False) -> list[str]:
    names = [f"{w.title} ({w.unit})" if units else w.title for w in wls]
    out = [title + "\n", "| setup | " + " | ".join(names) + " |", "|---|" + "---:|" * len(wls)]
    for setup in dict.fromkeys(r.setup for r in rows):
        cells = []
        for wl in wls:
            row = _find(rows, setup, wl)
            cells.append("-" if row is None else cell(row, wl))
        out.append(f"| {setup} | " + " | ".join(cells) + " |")
    return out


def hosts_report(rows: Sequence[HostRow], wls: Sequence[Workload], cap: float,
                 rate: float) -> str:
    """Throughput (and its ratio to the one gateway), CPU per request, capacity."""
    def throughput(row: HostRow, wl: Workload) -> str:
        value, base = row.result.value(wl.unit), _find(rows, "1 gateway", wl)
        ratio = f" ({value / base.result.value(wl.unit):.2f}x)" \
            if base is not None and base is not row and base.result.value(wl.unit) else ""
        errors = f" ({row.result.errors} errors)" if row.result.errors else ""
        return f"{value:.0f}{ratio}{errors}"

    def hosts_needed(row: HostRow, _wl: Workload) -> str:
        return str(math.ceil(rate * row.cpu_us / 1e6 / cap)) if row.cpu_us else "-"

    out = _table(f"Throughput, each member capped at {cap} CPU (a cgroup of its own), "
                 "requests round robin", rows, wls, throughput, units=True)
    out += [""] + _table("Members' CPU per request, microseconds (all members together)",
                         rows, wls, lambda row, _wl: f"{row.cpu_us:.0f}")
    out += [""] + _table("The load generator's CPU per request, microseconds (uncapped: "
                         "it must not be the bound)", rows, wls,
                         lambda row, _wl: f"{row.result.client_cpu_us_per_op or 0:.0f}")
    out += [""] + _table(f"Capacity: hosts of {cap} CPU that serve {rate:.0f} requests/s "
                         "of one shape at the measured cost", rows, wls, hosts_needed)
    return "\n".join(out)
