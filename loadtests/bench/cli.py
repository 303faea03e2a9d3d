"""``python -m loadtests.bench``: Squall configurations side by side with direct posix I/O.

For each configuration (``--config NAME=ARGS``, repeatable) the driver starts
``squall serve`` in its own temporary data directory on a free loopback port and waits for
``/_squall/health``; peers and given endpoints join them. Every workload then runs on
every server before the next workload (the servers' order turns by one per workload),
and the servers are stopped by PID at the end. The baseline runs
the same workloads straight against a posix directory (temp file + fsync + rename, read
back) with as many threads as the workload has clients. One table is printed to stdout
(progress goes to stderr), with ``--markdown`` as a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shlex
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from backends.core.units import parse_duration, parse_size
from gateway.client.credentials import MissingCredentials, credentials_from_env
from gateway.client.sigv4 import DEFAULT_REGION, Signer
from loadtests.bench.configs import (
    DEFAULT_CONFIGS,
    SQUALL_TEMPLATE,
    GatewayConfig,
    parse_config,
    parse_named,
    server_command,
)
from loadtests.bench.cpu import cpu_seconds
from loadtests.bench.engine import Measurement, run_loop, run_workload
from loadtests.bench.locust_run import LocustFailed, LocustWorkload, locust_command, run_locust
from loadtests.bench.peers import PEERS, parse_peers, peer_server
from loadtests.bench.processes import run_processes
from loadtests.bench.server import (
    HEALTH_PATH,
    ServerFailed,
    ServerProcess,
    cache_counters,
    free_port,
    reported_durability,
    wait_settled,
)
from loadtests.bench.table import (
    Column,
    Result,
    build_cpu_table,
    build_ratio_table,
    build_table,
    render_markdown,
    render_text,
)
from loadtests.bench.targets import PosixTarget, S3Target, TargetError
from loadtests.bench.warp import WarpFailed, find_warp, run_warp, warp_command
from loadtests.bench.workloads import Workload, select, standard_workloads

T = TypeVar("T")
_UNBOUNDED = 10**9  # operation count of a sustained run: bounded by its duration only
Row = Workload | LocustWorkload


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m loadtests.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--config",
        action="append",
        metavar="NAME=ARGS",
        default=[],
        help="a gateway configuration: extra 'squall serve' arguments (repeatable; "
        f"default: {' and '.join(repr(c) for c in DEFAULT_CONFIGS)})",
    )
    p.add_argument(
        "--endpoint",
        action="append",
        metavar="NAME=URL",
        default=[],
        help="also measure an S3 endpoint that is already running (repeatable)",
    )
    p.add_argument(
        "--server-cmd",
        default=SQUALL_TEMPLATE,
        help="server command template; fields {squall} {python} {host} {port} {data_dir} "
        "{backend_dir} (default: %(default)s)",
    )
    p.add_argument("--health-path", default=HEALTH_PATH, help="answers 200 once ready")
    p.add_argument(
        "--peers",
        default="auto",
        help="peer servers run beside Squall in the same run: 'auto' (MinIO and versitygw "
        "when found on PATH or in ~/go/bin), 'none', or a list such as 'minio,versitygw'",
    )
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the direct posix baseline column",
    )
    p.add_argument(
        "--tool",
        choices=("native", "warp"),
        default="native",
        help="native: the built-in aiohttp client; warp: MinIO's warp (on PATH)",
    )
    p.add_argument(
        "--warp-args",
        default="",
        help="extra arguments passed to warp (write --warp-args='--flag value')",
    )
    p.add_argument(
        "--workloads",
        default="",
        help="comma-separated workload keys to run (default all), e.g. put-64MiB-c1",
    )
    p.add_argument("--duration", default="10s", help="time limit of each timed run")
    p.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="processes of the built-in client sharing each workload's clients (one "
        "process takes bodies on one core, the bound of large GETs on small machines)",
    )
    p.add_argument(
        "--sustained",
        action="store_true",
        help="every run lasts --duration (default here 60s) whatever the operation counts",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each workload N times per target and keep the median run",
    )
    p.add_argument("--large-size", default="64MiB")
    p.add_argument("--large-count", type=int, default=8, help="operations per large run at most")
    p.add_argument("--large-clients", default="1,4", help="concurrencies of the large runs")
    p.add_argument("--small-size", default="4KiB")
    p.add_argument("--small-count", type=int, default=2000)
    p.add_argument("--small-clients", type=int, default=16)
    p.add_argument("--mixed-size", default="10MiB")
    p.add_argument("--mixed-count", type=int, default=200)
    p.add_argument("--mixed-clients", type=int, default=8)
    p.add_argument("--mixed-objects", type=int, default=16, help="objects in the mixed pool")
    p.add_argument(
        "--locust",
        action="append",
        default=[],
        metavar="SCENARIO",
        help="also run loadtests/SCENARIO.py headless per target (requests/s row)",
    )
    p.add_argument("--locust-users", type=int, default=8)
    p.add_argument(
        "--locust-args",
        default="",
        help="extra arguments passed to locust (write --locust-args='--flag value')",
    )
    p.add_argument("--bucket", default="squall-bench")
    p.add_argument("--region", default=DEFAULT_REGION)
    p.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="where temporary data directories go (default: the system temp dir)",
    )
    p.add_argument("--keep", action="store_true", help="keep data directories and server logs")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    return p


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def _native_s3(endpoint: str, signer: Signer, bucket: str, wl: Workload,
                     cpu: Callable[[], float] | None = None) -> Measurement:
    target = S3Target(endpoint, bucket, signer, clients=wl.clients)
    try:
        await target.create_bucket()
        return await run_workload(target, wl, f"bench-{uuid.uuid4().hex[:8]}", cpu)
    finally:
        await target.close()


async def _native_posix(root: Path, wl: Workload) -> Measurement:
    target = PosixTarget(root, clients=wl.clients)
    try:
        return await run_workload(target, wl, f"bench-{uuid.uuid4().hex[:8]}")
    finally:
        await target.close()


def median_run(runs: Sequence[Measurement], unit: str) -> Measurement:
    """The run with the median figure (the lower middle one for an even count)."""
    ordered = sorted(runs, key=lambda m: m.value(unit))
    return ordered[(len(ordered) - 1) // 2]


def fsync_reported(endpoint: str, default: bool | None) -> bool | None:
    """Whether the server says it fsyncs each PUT (``/_squall/status``), else ``default``."""
    durability = reported_durability(endpoint)
    return default if durability is None else durability != "none"


def _report(column: str, row: Row, result: Result) -> None:
    if isinstance(result, str):
        _say(f"[{column}] {row.title}: failed: {result.splitlines()[0]}")
        return
    extra = f", {result.errors} errors (first: {result.first_error})" if result.errors else ""
    _say(f"[{column}] {row.title}: {result.value(row.unit):.1f} {row.unit}{extra}")


@dataclass(frozen=True, slots=True)
class Target:
    """A server the rows run against: started by the driver (``pid`` known) or given."""

    name: str
    endpoint: str
    pid: int | None
    fsync: bool | None
    failure: str | None = None  # why it could not be started


class Driver:
    """Runs every row against every target and collects the results."""

    def __init__(self, args: argparse.Namespace, rows: list[Row], workdir: Path) -> None:
        self.args = args
        self.rows = rows
        self.workdir = workdir
        self.credentials = credentials_from_env()
        self.signer = Signer(self.credentials, args.region)

    def baseline(self) -> dict[str, Result]:
        results: dict[str, Result] = {}
        root = self.workdir / "posix-direct"
        root.mkdir(parents=True, exist_ok=True)
        for row in self.rows:
            if isinstance(row, Workload):
                runs = [run_loop(_native_posix(root, row)) for _ in range(self.args.repeat)]
                results[row.key] = median_run(runs, row.unit)
                _report("posix direct", row, results[row.key])
        shutil.rmtree(root, ignore_errors=True)
        return results

    def run(self, targets: Sequence[Target]) -> dict[str, dict[str, Result]]:
        """Every row against every target, interleaved: each workload runs on all targets
        before the next one, and the order of the targets turns by one per workload, so
        no target always runs first (after a cold start, or another's write-back)."""
        results: dict[str, dict[str, Result]] = {t.name: {} for t in targets}
        live = [t for t in targets if t.failure is None]
        for index, row in enumerate(self.rows):
            shift = index % len(live) if live else 0
            for target in live[shift:] + live[:shift]:
                results[target.name][row.key] = self.measure(target, row)
        for target in targets:
            if target.failure is not None:
                results[target.name] = {row.key: target.failure for row in self.rows}
        return results

    def measure(self, target: Target, row: Row) -> Result:
        """One row against one target (median of ``--repeat`` runs), reported."""
        name, endpoint = target.name, target.endpoint
        result: Result
        try:
            runs = []
            for _ in range(self.args.repeat):
                before = cache_counters(endpoint)
                runs.append(self._one(name, endpoint, row, target.pid))
                settled = wait_settled(endpoint)
                if settled is not None and settled >= 1:
                    _say(f"[{name}] {row.title}: {settled:.1f}s to flush what it left")
                after = cache_counters(endpoint)
                if before is not None and after is not None:
                    _say(f"[{name}] {row.title}: " + ", ".join(
                        f"{what} {after[what] - before[what]}" for what in after))
            result = median_run(runs, row.unit)
        except (TargetError, WarpFailed, LocustFailed, OSError) as exc:
            result = str(exc)
        _report(name, row, result)
        return result

    def _one(self, name: str, endpoint: str, row: Row, pid: int | None) -> Measurement:
        cpu = partial(cpu_seconds, pid) if pid is not None else None
        if isinstance(row, Workload) and self.args.tool == "native":
            if self.args.client_processes > 1 and row.clients > 1:
                return run_processes(endpoint, self.credentials, self.args.region,
                                     self.args.bucket, row, self.args.client_processes, cpu)
            return run_loop(_native_s3(endpoint, self.signer, self.args.bucket, row, cpu))
        before = cpu() if cpu is not None else None
        measured = self._external(name, endpoint, row)
        if cpu is not None and before is not None:
            measured.cpu_seconds = cpu() - before  # includes the tool's own preparation
            measured.seconds = measured.seconds or (
                row.seconds if isinstance(row, LocustWorkload) else row.duration)
        return measured

    def _external(self, name: str, endpoint: str, row: Row) -> Measurement:
        if isinstance(row, LocustWorkload):
            prefix = self.workdir / f"locust-{name}-{row.scenario}"
            argv = locust_command(
                row, endpoint=endpoint, csv_prefix=prefix, extra=shlex.split(self.args.locust_args)
            )
            return run_locust(argv, prefix, self._env(), timeout=row.seconds + 120)
        argv = warp_command(
            row,
            endpoint=endpoint,
            access_key=self.credentials.access_key,
            secret_key=self.credentials.secret_key,
            region=self.args.region,
            bucket=f"{self.args.bucket}-warp",
            warp=find_warp() or "warp",
            extra=shlex.split(self.args.warp_args),
        )
        return run_warp(argv, row, timeout=row.duration + 600)

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SQUALL_ACCESS_KEY": self.credentials.access_key,
            "SQUALL_SECRET_KEY": self.credentials.secret_key,
        }

    def start_peer(self, stack: contextlib.ExitStack, name: str) -> Target:
        """A peer server (MinIO, versitygw) started for this run (stopped with ``stack``)."""
        spec = PEERS[name]
        base = self.workdir / f"peer-{name}"
        if not self.args.keep:
            stack.callback(shutil.rmtree, base, True)
        try:
            server = peer_server(spec, self.credentials, base)
            _say(f"[{name}] starting: {' '.join(server.argv)}")
            stack.enter_context(server)
        except (ServerFailed, ValueError) as exc:
            _say(f"[{name}] {exc}")
            return Target(name, "", None, spec.fsync, failure=f"server failed: {exc}")
        return Target(name, server.endpoint, server.pid, spec.fsync)

    def start_gateway(self, stack: contextlib.ExitStack, config: GatewayConfig) -> Target:
        """``squall serve`` with ``config`` in its own directory (stopped with ``stack``)."""
        base = self.workdir / config.name
        (base / "backend").mkdir(parents=True, exist_ok=True)
        if not self.args.keep:
            stack.callback(shutil.rmtree, base, True)
        port = free_port()
        argv = server_command(
            self.args.server_cmd,
            config,
            host="127.0.0.1",
            port=port,
            data_dir=base / "data",
            backend_dir=base / "backend",
        )
        server = ServerProcess(
            argv,
            endpoint=f"http://127.0.0.1:{port}",
            log_path=self.workdir / f"{config.name}.log",
            env=self._env(),
            health_path=self.args.health_path,
        )
        _say(f"[{config.name}] starting: {' '.join(argv)}")
        fsync = config.fsync(squall=self.args.server_cmd == SQUALL_TEMPLATE)
        try:
            stack.enter_context(server)
        except ServerFailed as exc:
            _say(f"[{config.name}] {exc}")
            return Target(config.name, "", None, fsync, failure=f"server failed: {exc}")
        return Target(config.name, server.endpoint, server.pid,
                      fsync_reported(server.endpoint, fsync))


def _rows(args: argparse.Namespace) -> list[Row]:
    duration = parse_duration(args.duration)
    if args.sustained:
        duration = duration if args.duration != "10s" else 60.0
        args.large_count = args.small_count = args.mixed_count = _UNBOUNDED
    workloads = standard_workloads(
        large_size=parse_size(args.large_size),
        large_count=args.large_count,
        large_clients=[int(c) for c in args.large_clients.split(",") if c.strip()],
        small_size=parse_size(args.small_size),
        small_count=args.small_count,
        small_clients=args.small_clients,
        mixed_size=parse_size(args.mixed_size),
        mixed_count=args.mixed_count,
        mixed_clients=args.mixed_clients,
        mixed_objects=args.mixed_objects,
        duration=duration,
    )
    rows: list[Row] = list(select(workloads, args.workloads))
    rows += [LocustWorkload(s, args.locust_users, duration) for s in args.locust]
    return rows


def _ensure_credentials() -> None:
    """Generate credentials for the servers this run starts, unless some are set."""
    try:
        credentials_from_env()
    except MissingCredentials:
        os.environ["SQUALL_ACCESS_KEY"] = "bench" + secrets.token_hex(6)
        os.environ["SQUALL_SECRET_KEY"] = secrets.token_urlsafe(24)


def _legend(columns: Sequence[Column], configs: Sequence[GatewayConfig], md: bool) -> list[str]:
    described = {c.name: f"server arguments: {c.describe}" for c in configs}
    lines = []
    for col in columns:
        what = described.get(col.name, "external endpoint")
        lines.append(f"{'- ' if md else ''}{col.name}: {what}")
        failures = {r for r in col.results.values() if isinstance(r, str)}
        for failure in sorted(failures):
            lines.append(f"{'  - ' if md else '    '}failed: {failure.splitlines()[0]}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        rows = _rows(args)
        endpoints = [parse_named(e) for e in args.endpoint]
        configs = [parse_config(c) for c in (args.config or DEFAULT_CONFIGS)]
        peers = parse_peers(args.peers)
        if args.repeat < 1:
            raise ValueError("--repeat must be at least 1")
    except ValueError as exc:
        _say(f"bench: {exc}")
        return 2
    if args.tool == "warp" and find_warp() is None:
        _say("bench: --tool warp needs 'warp' on PATH (go install github.com/minio/warp@latest)")
        return 2
    _ensure_credentials()
    if args.work_dir:
        args.work_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="squall-bench-", dir=args.work_dir))
    try:
        driver = Driver(args, rows, workdir)
        baseline = {} if args.no_baseline else driver.baseline()
        with contextlib.ExitStack() as stack:
            targets = [driver.start_gateway(stack, c) for c in configs]
            targets += [driver.start_peer(stack, name) for name in peers]
            targets += [Target(name, url, None, fsync_reported(url, None))
                        for name, url in endpoints]
            results = driver.run(targets)
        columns = [Column(t.name, t.fsync, results[t.name]) for t in targets]
    finally:
        if args.keep:
            _say(f"bench: data and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    render = render_markdown if args.markdown else render_text
    tables = [build_table(rows, baseline, columns), build_ratio_table(rows, columns),
              build_cpu_table(rows, columns), build_cpu_table(rows, columns, client=True)]
    for table in tables:
        if table.rows:
            print(render(table))
            print()
    print("\n".join(_legend(columns, configs, args.markdown)))
    return 0
