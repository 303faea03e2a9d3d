"""FUSE benchmark: ``squall mount`` beside boto3 straight to the gateway, and beside s3fs-fuse.

``python -m loadtests.bench.fuse`` starts ``squall serve`` on a free loopback port with its own
temporary data directory, mounts a bucket with ``squall mount`` (a foreground subprocess),
and measures on the mount:

* sequential write of a ``--size-mib`` file with ``dd bs=1M`` and ``dd bs=4k``
  (``conv=fsync``), from a random local source file;
* sequential read of it back with the same block sizes, after ``sync`` and
  ``echo 3 > /proc/sys/vm/drop_caches``; where dropping is not permitted, the reads go to
  other files of the same size uploaded with boto3 before mounting, which no page cache holds;
* ``--files`` small files created (open, write ``--file-size`` bytes, close) one after another.

The same workloads then run with boto3 against the gateway (a managed upload of the same
file; ``GetObject`` bodies read in 1 MiB or 4 KiB pieces, after dropping the page cache as
for the mounts; one ``PutObject`` per small file),
and, when ``s3fs`` is installed (Debian package ``s3fs``), on an s3fs-fuse mount of the same
gateway. One Markdown table is printed with the ratios mount/boto3 and mount/s3fs.
With ``--repeat N`` every workload runs N times per column and each cell is the median
(runs on a machine shared with other work vary a lot). ``--cpu`` adds the CPU time per MiB
(per file) of the squall mount process, of boto3 (this process), of s3fs, of the gateway and
of the whole machine in each case (``/proc/PID/stat``, ``/proc/stat``: steadier than
throughput on a shared machine), and the cores each kept busy (a workload whose machine
column nears the core count is bound by the CPU). ``--mount-option`` passes an option
to ``squall mount`` (e.g. ``--mount-option=--writeback-cache``); the column is named after it.
Every process started here is stopped by its PID and every mount unmounted, also on failure.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from loadtests.bench.cpu import cpu_seconds, machine_cpu_seconds
from loadtests.bench.server import ServerProcess, free_port
from loadtests.bench.table import format_value

MiB = 1024 * 1024
ACCESS_KEY = "FUSEBENCHACCESS"
SECRET_KEY = "fuse-bench-secret-key"

# A cell: a figure, or the reason there is none ("s3fs is not installed").
Cell = float | str


@dataclass(frozen=True, slots=True)
class Workload:
    key: str
    title: str
    unit: str


WORKLOADS: tuple[Workload, ...] = (
    Workload("write_1m", "sequential write, bs=1M", "MiB/s"),
    Workload("read_1m", "sequential read, bs=1M", "MiB/s"),
    Workload("write_4k", "sequential write, bs=4k", "MiB/s"),
    Workload("read_4k", "sequential read, bs=4k", "MiB/s"),
    Workload("creates", "small files created", "files/s"),
)


@dataclass(frozen=True, slots=True)
class Column:
    """One way of reaching the gateway, and its figure per workload key."""

    name: str
    results: Mapping[str, Cell]


# ---------------------------------------------------------------------------------------
# The table


def format_cell(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    if isinstance(cell, str):
        return "n/a"
    return format_value(cell)


def format_ratio(numerator: Cell | None, denominator: Cell | None) -> str:
    if not isinstance(numerator, float) or not isinstance(denominator, float):
        return "-"
    if denominator <= 0:
        return "-"
    return f"{numerator / denominator:.2f}x"


def build_table(mount: Column, direct: Column, s3fs: Column,
                workloads: Sequence[Workload] = WORKLOADS) -> list[list[str]]:
    """Header row first, then one row per workload: the three figures and the two ratios."""
    rows = [["workload", "unit", mount.name, direct.name, s3fs.name,
             f"{mount.name} / {direct.name}", f"{mount.name} / {s3fs.name}"]]
    for w in workloads:
        m, d, s = (c.results.get(w.key) for c in (mount, direct, s3fs))
        rows.append([w.title, w.unit, format_cell(m), format_cell(d), format_cell(s),
                     format_ratio(m, d), format_ratio(m, s)])
    return rows


def notes(columns: Sequence[Column], workloads: Sequence[Workload] = WORKLOADS) -> list[str]:
    """The reasons behind ``n/a`` cells, each once."""
    seen: list[str] = []
    for column in columns:
        for w in workloads:
            cell = column.results.get(w.key)
            if isinstance(cell, str):
                line = f"{column.name}: {cell}"
                if line not in seen:
                    seen.append(line)
    return seen


def render_markdown(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(rows[0]), sep, *(line(r) for r in rows[1:])])


# ---------------------------------------------------------------------------------------
# CPU time


class CpuMeter:
    """CPU time per unit of work (ms per MiB or per file) of named clocks (CPU seconds so
    far: of a process, of this one, of the whole machine), per workload; and the cores
    each kept busy meanwhile (CPU seconds per second of the workload)."""

    def __init__(self, clocks: Mapping[str, Callable[[], float]]) -> None:
        self._clocks = dict(clocks)
        self.runs: dict[str, list[dict[str, float]]] = {}
        self.cores: dict[str, list[dict[str, float]]] = {}

    @property
    def names(self) -> list[str]:
        return list(self._clocks)

    def _now(self) -> dict[str, float]:
        return {name: clock() for name, clock in self._clocks.items()}

    @contextmanager
    def measure(self, key: str, units: float) -> Iterator[None]:
        before, start = self._now(), time.perf_counter()
        yield
        after, seconds = self._now(), time.perf_counter() - start
        used = {name: after[name] - before[name] for name in after}
        self.runs.setdefault(key, []).append(
            {name: cpu * 1000 / units for name, cpu in used.items()})
        self.cores.setdefault(key, []).append(
            {name: cpu / seconds for name, cpu in used.items()})

    def medians(self, *, cores: bool = False) -> dict[str, dict[str, float]]:
        """Per workload, the median of each clock's ms per unit (``cores``: cores busy)."""
        measured = self.cores if cores else self.runs
        return {key: {name: statistics.median(r[name] for r in runs) for name in runs[0]}
                for key, runs in measured.items()}


def cpu_table(meters: Sequence[CpuMeter], workloads: Sequence[Workload] = WORKLOADS, *,
              cores: bool = False) -> list[list[str]]:
    """Header row, then per workload the CPU ms per unit of every clock measured (with
    ``cores``: the cores each kept busy)."""
    medians = [m.medians(cores=cores) for m in meters]
    names = [name for m in meters for name in m.names]
    rows = [["workload", *([] if cores else ["CPU per"]), *names]]
    for w in workloads:
        per = [] if cores else ["file" if w.unit == "files/s" else "MiB"]
        cells = [(f"{med[w.key][name]:.2f}" if cores else f"{med[w.key][name]:.2f} ms")
                 if w.key in med else "-"
                 for m, med in zip(meters, medians, strict=True) for name in m.names]
        rows.append([w.title, *per, *cells])
    return rows


# ---------------------------------------------------------------------------------------
# Measuring


@dataclass(frozen=True, slots=True)
class Sizes:
    size: int  # bytes of the sequential file (a multiple of 1 MiB)
    files: int
    file_size: int


def drop_caches() -> bool:
    """``sync`` then drop the page cache; False when this process may not."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        return False
    return True


def dd(src: Path | str, dst: Path | str, bs: int, count: int, fsync: bool) -> float:
    """Run dd; returns the elapsed seconds. Raises if dd fails or copies the wrong amount."""
    argv = ["dd", f"if={src}", f"of={dst}", f"bs={bs}", f"count={count}"]
    if fsync:
        argv.append("conv=fsync")
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    copied = re.search(r"^(\d+) bytes", result.stderr, re.MULTILINE)
    if copied is None or int(copied.group(1)) != bs * count:
        raise RuntimeError(f"{' '.join(argv)} copied the wrong amount: {result.stderr.strip()}")
    return elapsed


def rate(amount: float, seconds: float) -> float:
    return amount / max(seconds, 1e-9)


def median_cells(runs: Sequence[Mapping[str, Cell]]) -> dict[str, Cell]:
    """Per workload key, the median of the figures of several runs (a reason stays)."""
    out: dict[str, Cell] = {}
    for key in runs[0]:
        figures = [cell for r in runs if isinstance(cell := r.get(key), float)]
        out[key] = statistics.median(figures) if figures else runs[0][key]
    return out


def fs_workloads(root: Path, source: Path, sizes: Sizes, cold_reads: bool,
                 run: int = 0, cpu: CpuMeter | None = None) -> dict[str, Cell]:
    """The workloads on a mounted directory. With ``cold_reads`` the page cache is dropped
    before each read; otherwise ``cold-1m-<run>.bin``/``cold-4k-<run>.bin`` (put there
    beforehand) are read. ``cpu`` measures the CPU time of each workload."""
    mib = sizes.size / MiB
    meter = cpu if cpu is not None else CpuMeter({})
    out: dict[str, Cell] = {}
    for bs, tag in ((MiB, "1m"), (4096, "4k")):
        target = root / f"seq-{tag}.bin"
        with meter.measure(f"write_{tag}", mib):
            out[f"write_{tag}"] = rate(mib, dd(source, target, bs, sizes.size // bs,
                                               fsync=True))
        readable = target if cold_reads and drop_caches() else root / f"cold-{tag}-{run}.bin"
        with meter.measure(f"read_{tag}", mib):
            out[f"read_{tag}"] = rate(mib, dd(readable, "/dev/null", bs, sizes.size // bs,
                                              False))
    directory = root / f"creates-{run}"
    directory.mkdir()
    payload = os.urandom(sizes.file_size)
    with meter.measure("creates", sizes.files):
        start = time.perf_counter()
        for i in range(sizes.files):
            with open(directory / f"f-{i:05d}", "wb") as f:
                f.write(payload)
        out["creates"] = rate(sizes.files, time.perf_counter() - start)
    return out


def s3_client(endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      retries={"max_attempts": 3}))


def boto3_workloads(s3: Any, bucket: str, source: Path, sizes: Sizes,
                    run: int = 0, *, cold_reads: bool = False,
                    cpu: CpuMeter | None = None) -> dict[str, Cell]:
    """Managed upload (both write rows: boto3 has no write block size); GetObject bodies read
    in 1 MiB or 4 KiB pieces; one PutObject per small file. With ``cold_reads`` the page
    cache is dropped before each read, as for the mounts (the gateway then reads its data
    directory from disk, not from the memory the upload just filled)."""
    mib = sizes.size / MiB
    meter = cpu if cpu is not None else CpuMeter({})
    out: dict[str, Cell] = {}
    for bs, tag in ((MiB, "1m"), (4096, "4k")):
        key = f"seq-{tag}.bin"
        with meter.measure(f"write_{tag}", mib):
            start = time.perf_counter()
            s3.upload_file(str(source), bucket, key)
            out[f"write_{tag}"] = rate(mib, time.perf_counter() - start)
        if cold_reads:
            drop_caches()
        with meter.measure(f"read_{tag}", mib):
            start = time.perf_counter()
            body = s3.get_object(Bucket=bucket, Key=key)["Body"]
            total = 0
            while chunk := body.read(bs):
                total += len(chunk)
            elapsed = time.perf_counter() - start
        if total != sizes.size:
            raise RuntimeError(f"GetObject {key} returned {total} bytes, not {sizes.size}")
        out[f"read_{tag}"] = rate(mib, elapsed)
    payload = os.urandom(sizes.file_size)
    with meter.measure("creates", sizes.files):
        start = time.perf_counter()
        for i in range(sizes.files):
            s3.put_object(Bucket=bucket, Key=f"creates-{run}/f-{i:05d}", Body=payload)
        out["creates"] = rate(sizes.files, time.perf_counter() - start)
    return out


# ---------------------------------------------------------------------------------------
# Processes and mounts


def is_mounted(mountpoint: Path) -> bool:
    target = os.path.abspath(mountpoint)
    with open("/proc/self/mounts") as table:
        return any(len(f) > 1 and f[1] == target for f in (line.split() for line in table))


def fuse_unavailable() -> str | None:
    """Why FUSE mounts cannot be made here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian package fuse3)"
    return None


@contextmanager
def mounted(argv: Sequence[str], mountpoint: Path, log_path: Path,
            env: Mapping[str, str] | None = None, timeout: float = 60.0,
            pids: list[int] | None = None) -> Iterator[Path]:
    """Run a foreground FUSE file system (its PID is ours, appended to ``pids``); unmount
    and reap it at the end."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT,
                                env=dict(env) if env is not None else None)
    if pids is not None:
        pids.append(proc.pid)
    try:
        deadline = time.monotonic() + timeout
        while not is_mounted(mountpoint):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{argv[0]} did not mount {mountpoint}:\n{tail}")
            time.sleep(0.05)
        yield mountpoint
    finally:
        for lazy in ((), ("-z",)):
            if not is_mounted(mountpoint):
                break
            subprocess.run(["fusermount3", "-u", *lazy, str(mountpoint)],
                           capture_output=True, check=False)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SQUALL_"))}
    return {**env, "SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY}


def squall_mount_argv(endpoint: str, bucket: str, mountpoint: Path,
                      options: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "gateway.commands.cli", "mount", endpoint, bucket, str(mountpoint),
            *options]


def s3fs_argv(endpoint: str, bucket: str, mountpoint: Path, passwd: Path) -> list[str]:
    options = [f"url={endpoint}", "use_path_request_style", f"passwd_file={passwd}", "sigv4",
               "endpoint=us-east-1"]
    argv = ["s3fs", bucket, str(mountpoint), "-f"]
    for option in options:
        argv += ["-o", option]
    return argv


def gateway_server(workdir: Path) -> ServerProcess:
    """``squall serve`` on a free loopback port with its data in ``workdir/data`` (not started:
    use it as a context manager, which stops it by its PID)."""
    port = free_port()
    return ServerProcess(
        [sys.executable, "-m", "gateway.commands.cli", "serve", "--listen", f"127.0.0.1:{port}",
         "--data-dir", str(workdir / "data"), "--log-level", "warning", "--public-status"],
        endpoint=f"http://127.0.0.1:{port}", log_path=workdir / "gateway.log", env=child_env())


# ---------------------------------------------------------------------------------------
# The run


@dataclass(frozen=True, slots=True)
class Report:
    columns: tuple[Column, Column, Column]
    notes: tuple[str, ...]
    cpu: tuple[list[str], ...] = ()  # rows of the CPU table (--cpu), header first
    cores: tuple[list[str], ...] = ()  # rows of the cores-busy table (--cpu), header first

    def markdown(self) -> str:
        text = render_markdown(build_table(*self.columns))
        if self.notes:
            text += "\n\n" + "\n".join(f"* {n}" for n in self.notes)
        if self.cpu:
            text += "\n\nCPU time per unit of work (median):\n\n" + render_markdown(self.cpu)
        if self.cores:
            text += ("\n\nCores kept busy during each workload (median; this machine has "
                     f"{os.cpu_count()}):\n\n" + render_markdown(self.cores))
        return text


def run(sizes: Sizes, workdir: Path, *, with_s3fs: bool = True, drop_page_cache: bool = True,
        repeat: int = 1, mount_options: Sequence[str] = (), cpu: bool = False,
        progress: Callable[[str], None] = lambda _: None) -> Report:
    """Start the gateway, measure the three columns (each workload ``repeat`` times, the
    median kept), stop everything.

    ``drop_page_cache=False`` never touches the machine's page cache (reads then go to
    files uploaded with boto3 beforehand)."""
    if (reason := fuse_unavailable()) is not None:
        raise RuntimeError(f"cannot mount FUSE here: {reason}")
    source = workdir / "source.bin"
    with open(source, "wb") as f:
        f.writelines(os.urandom(MiB) for _ in range(sizes.size // MiB))
    server = gateway_server(workdir)
    endpoint = server.endpoint
    cold_reads = drop_page_cache and drop_caches()
    extra: list[str] = [] if cold_reads else [
        "page cache not dropped: the mounts read files uploaded with boto3 beforehand"]
    with server:
        s3 = s3_client(endpoint)

        def new_bucket(prefix: str) -> str:
            name = f"{prefix}-{uuid.uuid4().hex[:12]}"
            s3.create_bucket(Bucket=name)
            if not cold_reads:
                for tag in ("1m", "4k"):
                    for i in range(repeat):
                        s3.upload_file(str(source), name, f"cold-{tag}-{i}.bin")
            return name

        def fs_runs(root: Path, meter: CpuMeter | None = None) -> dict[str, Cell]:
            return median_cells([fs_workloads(root, source, sizes, cold_reads, i, meter)
                                 for i in range(repeat)])

        name = " ".join(["squall mount", *mount_options])
        progress(name)
        bucket = new_bucket("mount")
        argv = squall_mount_argv(endpoint, bucket, workdir / "mnt", mount_options)
        pids: list[int] = []
        meters: list[CpuMeter] = []
        gateway_pid = server.pid if cpu else None

        def meter(client: str, clock: Callable[[], float], column: str) -> CpuMeter | None:
            """The CPU meter of one column (None without ``--cpu``)."""
            if gateway_pid is None:
                return None
            meters.append(CpuMeter({client: clock,
                                    f"gateway ({column})": partial(cpu_seconds, gateway_pid),
                                    f"machine ({column})": machine_cpu_seconds}))
            return meters[-1]

        with mounted(argv, workdir / "mnt", workdir / "mount.log", env=child_env(),
                     pids=pids) as root:
            mount = Column(name, fs_runs(root, meter("mount process",
                                                     partial(cpu_seconds, pids[0]), "mount")))
        progress("boto3")
        bucket = new_bucket("boto3")
        boto3_meter = meter("boto3 client", time.process_time, "boto3")
        direct = Column("boto3", median_cells([
            boto3_workloads(s3, bucket, source, sizes, i, cold_reads=cold_reads,
                            cpu=boto3_meter)
            for i in range(repeat)]))
        s3fs_results: dict[str, Cell]
        if not with_s3fs:
            s3fs_results = dict.fromkeys((w.key for w in WORKLOADS), "not run (--no-s3fs)")
        elif shutil.which("s3fs") is None:
            s3fs_results = dict.fromkeys((w.key for w in WORKLOADS),
                                         "s3fs is not installed (Debian package s3fs)")
        else:
            progress("s3fs")
            passwd = workdir / "s3fs.passwd"
            passwd.write_text(f"{ACCESS_KEY}:{SECRET_KEY}\n")
            passwd.chmod(0o600)
            bucket = new_bucket("s3fs")
            argv = s3fs_argv(endpoint, bucket, workdir / "s3fs-mnt", passwd)
            s3fs_pids: list[int] = []
            with mounted(argv, workdir / "s3fs-mnt", workdir / "s3fs.log",
                         pids=s3fs_pids) as root:
                s3fs_results = fs_runs(root, meter("s3fs process",
                                                   partial(cpu_seconds, s3fs_pids[0]), "s3fs"))
        s3fs = Column("s3fs", s3fs_results)
    columns = (mount, direct, s3fs)
    return Report(columns, tuple(extra + notes(columns)),
                  tuple(cpu_table(meters)) if meters else (),
                  tuple(cpu_table(meters, cores=True)) if meters else ())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.fuse",
                                     description="squall mount vs boto3 vs s3fs-fuse")
    parser.add_argument("--size-mib", type=int, default=256,
                        help="size of the sequential file in MiB (default 256)")
    parser.add_argument("--files", type=int, default=1000, help="small files created")
    parser.add_argument("--file-size", type=int, default=4096, help="bytes per small file")
    parser.add_argument("--no-s3fs", action="store_true", help="skip the s3fs column")
    parser.add_argument("--no-drop-caches", action="store_true",
                        help="leave the page cache alone; read files uploaded with boto3")
    parser.add_argument("--workdir", type=Path,
                        help="keep data, mounts and logs here (default: a temporary directory)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of every workload per column; cells are medians (default 1)")
    parser.add_argument("--cpu", action="store_true",
                        help="add the CPU time per MiB / per file of the mount process, "
                             "of boto3 and of the gateway")
    parser.add_argument("--mount-option", action="append", default=[], metavar="OPTION",
                        help="pass OPTION to squall mount, e.g. --mount-option=--writeback-cache")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sizes = Sizes(args.size_mib * MiB, args.files, args.file_size)
    options: dict[str, Any] = {"with_s3fs": not args.no_s3fs,
                               "drop_page_cache": not args.no_drop_caches,
                               "repeat": args.repeat, "mount_options": args.mount_option,
                               "cpu": args.cpu}

    def progress(message: str) -> None:
        print(f"measuring: {message}", file=sys.stderr, flush=True)

    try:
        if args.workdir is not None:
            args.workdir.mkdir(parents=True, exist_ok=True)
            report = run(sizes, args.workdir, progress=progress, **options)
        else:
            with tempfile.TemporaryDirectory(prefix="squall-fuse-bench-") as tmp:
                report = run(sizes, Path(tmp), progress=progress, **options)
    except RuntimeError as exc:
        print(f"fuse bench: {exc}", file=sys.stderr)
        return 1
    print(f"{args.size_mib} MiB sequential file, {args.files} files of {args.file_size} bytes"
          + (f", median of {args.repeat} runs" if args.repeat > 1 else "") + "\n")
    print(report.markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
