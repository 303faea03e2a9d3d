"""MPI checkpoint benchmark: N-N and N-1 checkpoints through ``squall mount``, beside a local
directory and s3fs-fuse.

``python -m loadtests.bench.fuse_mpi`` runs the job of :mod:`loadtests.bench.mpi_writer` under
``mpirun -n RANKS --oversubscribe`` (as root also ``--allow-run-as-root``), ``--size-mib`` MiB
per rank and step, in two modes:

* **N-N**: every rank writes its own file (1 MiB writes), fsync, close, barrier;
* **N-1**: all ranks write disjoint contiguous ranges of one file with MPI-IO's collective
  ``Write_at_all`` (calls of about 1 MiB), ``Sync``, ``Close``.

Targets: a local directory in the work directory (the disk of the gateway's data), a
``squall mount`` (default options; for N-1 ``--shared-files`` names the checkpoint files, so
the ranks' ranges are one upload), and an s3fs-fuse mount (when ``s3fs`` is installed), both
of a gateway this driver starts on a free loopback port. The time is rank 0's, from a barrier
before the first open to a barrier after the last close (``MPI.Wtime``). The ranks' bytes come
from the generators of the test jobs (:mod:`loadtests.mpi.content`), written once to content files that each rank reads before the clock
starts; after every run each file (local) or object (at the gateway) is checked for its size and
SHA-256. Every ``mpirun`` has a timeout; mounts are unmounted and the gateway stopped by PID,
also on failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtests.bench.fuse import (
    ACCESS_KEY,
    SECRET_KEY,
    Cell,
    Column,
    MiB,
    Workload,
    child_env,
    format_cell,
    format_ratio,
    fuse_unavailable,
    gateway_server,
    median_cells,
    mounted,
    notes,
    render_markdown,
    s3_client,
    s3fs_argv,
    squall_mount_argv,
)
from loadtests.bench.mpi_writer import (
    MODES,
    content,
    content_name,
    n1_file,
    total_bytes,
)
from loadtests.bench.server import wait_settled
from loadtests.mpi.content import checkpoint_key
from loadtests.mpi.launch import mpi_unavailable, mpirun_argv, run_mpi

REPO = Path(__file__).resolve().parents[2]
#: Keys of the N-1 files, relative to the bucket: ``--shared-files`` of the squall mount.
N1_GLOB = "n1-run-*/step-*.bin"
LOCAL, SQUALL, S3FS = "local dir", "squall mount", "s3fs"
#: Expected (size, SHA-256 hex) of every file of a run, by path relative to its directory.
Expected = dict[str, tuple[int, str]]


@dataclass(frozen=True, slots=True)
class Job:
    """The MPI job: ranks, bytes per rank and step (the base size of the test generators)."""

    ranks: int
    size: int
    steps: int = 1

    def workloads(self) -> tuple[Workload, ...]:
        mib = f"{self.ranks} x {self.size / MiB:g} MiB" + (
            f" x {self.steps} steps" if self.steps > 1 else "")
        return (Workload("nn", f"N-N ({mib}, a file per rank)", "MiB/s"),
                Workload("n1", f"N-1 ({mib}, one shared file)", "MiB/s"))


# ---------------------------------------------------------------------------------------
# The table


@dataclass(frozen=True, slots=True)
class Report:
    """The three columns (local, squall mount, s3fs), notes, and the runs verified."""

    job: Job
    columns: tuple[Column, Column, Column]
    notes: tuple[str, ...]
    verified: int
    failures: tuple[str, ...] = field(default=())

    def rows(self) -> list[list[str]]:
        out = [["checkpoint", f"{LOCAL} MiB/s", f"{SQUALL} MiB/s", f"{S3FS} MiB/s",
                "squall / local", "squall / s3fs"]]
        for w in self.job.workloads():
            cells = [c.results.get(w.key) for c in self.columns]
            out.append([w.title, *(format_cell(c) for c in cells),
                        format_ratio(cells[1], cells[0]), format_ratio(cells[1], cells[2])])
        return out

    def markdown(self) -> str:
        text = render_markdown(self.rows())
        lines = [*self.notes, *(f"FAILED: {f.splitlines()[0]}" for f in self.failures),
                 (f"verified: {self.verified} runs, every file or object with the expected "
                  "size and SHA-256")]
        return text + "\n\n" + "\n".join(f"* {n}" for n in lines)


# ---------------------------------------------------------------------------------------
# MPI and the content of the ranks


def _write_content(mode: str, job: Job, rank: int, step: int, path: Path) -> str:
    data = content(mode, job.ranks, rank, step, job.size)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _file_digest(paths: Iterable[Path]) -> tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    for path in paths:
        with open(path, "rb") as f:
            while chunk := f.read(MiB):
                digest.update(chunk)
                size += len(chunk)
    return size, digest.hexdigest()


def prepare_content(job: Job, directory: Path) -> dict[str, Expected]:
    """Write every rank's bytes to ``directory`` (the generators are slow: once, in worker
    processes) and return what each mode's files must hold."""
    directory.mkdir(parents=True, exist_ok=True)
    tasks = [("nn", r, k) for r in range(job.ranks) for k in range(job.steps)]
    tasks += [("n1", r, 0) for r in range(job.ranks)]
    with ProcessPoolExecutor(max_workers=min(len(tasks), os.cpu_count() or 1)) as pool:
        digests = dict(zip(tasks, pool.map(
            _write_content, *zip(*((m, job, r, k, directory / content_name(m, r, k))
                                   for m, r, k in tasks), strict=True)), strict=True))
    nn = {checkpoint_key(r, k): ((directory / content_name("nn", r, k)).stat().st_size,
                                 digests["nn", r, k])
          for r in range(job.ranks) for k in range(job.steps)}
    whole = _file_digest(directory / content_name("n1", r, 0) for r in range(job.ranks))
    n1 = {n1_file(k): whole for k in range(job.steps)}
    return {"nn": nn, "n1": n1}


def run_job(job: Job, mode: str, directory: Path, content_dir: Path, log_path: Path,
            timeout: float) -> float:
    """One ``mpirun`` of the job; the seconds rank 0 measured. Raises RuntimeError when it
    fails or outlives ``timeout``."""
    argv = [*mpirun_argv(job.ranks), sys.executable, "-m", "loadtests.bench.mpi_writer", mode,
            str(directory), "--size", str(job.size), "--steps", str(job.steps),
            "--content-dir", str(content_dir)]
    env = {**child_env(), "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    timing = run_mpi(argv, log_path=log_path, timeout=timeout, env=env, cwd=REPO)
    if timing["bytes"] != total_bytes(mode, job.ranks, job.steps, job.size):
        raise RuntimeError(f"the job wrote {timing['bytes']} bytes, not the expected total")
    return float(timing["seconds"])


# ---------------------------------------------------------------------------------------
# Verifying


def _stream_digest(chunks: Iterable[bytes]) -> tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def _check(where: str, got: tuple[int, str], want: tuple[int, str]) -> None:
    if got[0] != want[0]:
        raise RuntimeError(f"verification failed: {where} has {got[0]} bytes, not {want[0]}")
    if got[1] != want[1]:
        raise RuntimeError(f"verification failed: {where} has the wrong bytes (SHA-256)")


def verify_files(directory: Path, expected: Expected) -> None:
    for name, want in expected.items():
        try:
            got = _file_digest([directory / name])
        except OSError as exc:
            raise RuntimeError(f"verification failed: {exc}") from exc
        _check(str(directory / name), got, want)


def verify_objects(s3: Any, bucket: str, prefix: str, expected: Expected) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    for name, want in expected.items():
        key = f"{prefix}{name}"
        try:
            body = s3.get_object(Bucket=bucket, Key=key)["Body"]
            got = _stream_digest(body.iter_chunks(MiB))
        except s3.exceptions.NoSuchKey:
            raise RuntimeError(f"verification failed: s3://{bucket}/{key} is missing") from None
        except (BotoCoreError, ClientError) as exc:
            raise RuntimeError(f"verification failed: s3://{bucket}/{key}: {exc}") from exc
        _check(f"s3://{bucket}/{key}", got, want)


# ---------------------------------------------------------------------------------------
# The run


def filesystem_type(path: Path) -> str:
    """The type of the file system holding ``path`` (longest mount point prefix)."""
    target, best, kind = str(path.resolve()), "", "?"
    with open("/proc/self/mounts") as table:
        for fields in (line.split() for line in table):
            point = fields[1]
            if (target == point or target.startswith(point.rstrip("/") + "/")) and \
                    len(point) >= len(best):
                best, kind = point, fields[2]
    return kind


@dataclass
class _Runs:
    """Figures and failures gathered while measuring."""

    job: Job
    content_dir: Path
    expected: dict[str, Expected]
    timeout: float
    progress: Callable[[str], None]
    verified: int = 0
    failures: list[str] = field(default_factory=list)

    def measure(self, target: str, mode: str, root: Path, run: int, log: Path,
                verify: Callable[[str, Expected], None],
                settle: Callable[[], None] = lambda: None) -> Cell:
        """One run of ``mode`` into ``root/<mode>-run-<run>``: MiB/s, or why there is none."""
        self.progress(f"{target}: {mode} run {run + 1}")
        name = f"{mode}-run-{run}"
        os.sync()  # nothing left from the previous run for this one's fsyncs to write
        try:
            seconds = run_job(self.job, mode, root / name, self.content_dir, log, self.timeout)
            settle()
            verify(f"{name}/", self.expected[mode])
        except RuntimeError as exc:
            self.failures.append(f"{target}, {mode}: {exc}")
            print(f"fuse mpi bench: {target}, {mode}: {exc}", file=sys.stderr, flush=True)
            return f"failed ({str(exc).splitlines()[0]})"
        self.verified += 1
        return total_bytes(mode, self.job.ranks, self.job.steps, self.job.size) / MiB / seconds

    def column(self, target: str, repeat: int,
               runs: Callable[[str, int], Cell]) -> Column:
        results = {mode: median_cells([{mode: runs(mode, i)} for i in range(repeat)])[mode]
                   for mode in MODES}
        return Column(target, results)


def run(job: Job, workdir: Path, *, with_s3fs: bool = True, repeat: int = 1,
        timeout: float = 300.0, progress: Callable[[str], None] = lambda _: None) -> Report:
    """Prepare the content, measure the three columns (``repeat`` runs per mode, the median
    kept), verify every run, stop everything."""
    for reason in (fuse_unavailable(), mpi_unavailable()):
        if reason is not None:
            raise RuntimeError(f"cannot run: {reason}")
    progress("content of the ranks")
    content_dir = workdir / "content"
    runs = _Runs(job, content_dir, prepare_content(job, content_dir), timeout, progress)
    extra: list[str] = []
    if (kind := filesystem_type(workdir)) in ("tmpfs", "ramfs"):
        extra.append(f"the work directory is on {kind}: the local column is memory, not disk")

    local_root = workdir / "local"
    local_root.mkdir(exist_ok=True)

    def local_run(mode: str, i: int) -> Cell:
        def verify(prefix: str, expected: Expected) -> None:
            verify_files(local_root / prefix, expected)

        cell = runs.measure(LOCAL, mode, local_root, i, workdir / "mpi-local.log", verify)
        shutil.rmtree(local_root / f"{mode}-run-{i}", ignore_errors=True)
        return cell

    local = runs.column(LOCAL, repeat, local_run)
    with gateway_server(workdir) as server:
        s3 = s3_client(server.endpoint)

        def settle() -> None:
            wait_settled(server.endpoint, timeout=timeout)

        def mount_column(target: str,
                         mount: Callable[[str, str, Path], AbstractContextManager[Path]],
                         ) -> Column:
            bucket = f"{target.split()[0]}-{uuid.uuid4().hex[:12]}"
            s3.create_bucket(Bucket=bucket)
            mountpoint = workdir / f"{target.split()[0]}-mnt"
            log = workdir / f"mpi-{target.split()[0]}.log"

            def verify(prefix: str, expected: Expected) -> None:
                verify_objects(s3, bucket, prefix, expected)

            results: dict[str, Cell] = {}
            for mode in MODES:
                cells: list[dict[str, Cell]] = []
                try:
                    with mount(mode, bucket, mountpoint) as root:
                        for i in range(repeat):
                            cells.append({mode: runs.measure(target, mode, root, i, log,
                                                             verify, settle)})
                except RuntimeError as exc:  # the mount itself failed
                    runs.failures.append(f"{target}, {mode}: {exc}")
                    cells.append({mode: f"failed ({str(exc).splitlines()[0]})"})
                results[mode] = median_cells(cells)[mode]
                _delete_prefix(s3, bucket, f"{mode}-run-")
                settle()
            return Column(target, results)

        def squall(mode: str, bucket: str, mountpoint: Path) -> AbstractContextManager[Path]:
            options = ["--shared-files", N1_GLOB] if mode == "n1" else []
            argv = squall_mount_argv(server.endpoint, bucket, mountpoint, options)
            return mounted(argv, mountpoint, workdir / "mount.log", env=child_env())

        squall_column = mount_column(SQUALL, squall)
        s3fs_column: Column
        if not with_s3fs:
            s3fs_column = Column(S3FS, dict.fromkeys(MODES, "not run (--no-s3fs)"))
        elif shutil.which("s3fs") is None:
            s3fs_column = Column(S3FS, dict.fromkeys(
                MODES, "s3fs is not installed (Debian package s3fs)"))
        else:
            passwd = workdir / "s3fs.passwd"
            passwd.write_text(f"{ACCESS_KEY}:{SECRET_KEY}\n")
            passwd.chmod(0o600)

            def s3fs(_mode: str, bucket: str, mountpoint: Path) -> AbstractContextManager[Path]:
                argv = s3fs_argv(server.endpoint, bucket, mountpoint, passwd)
                return mounted(argv, mountpoint, workdir / "s3fs.log")

            s3fs_column = mount_column(S3FS, s3fs)
    columns = (local, squall_column, s3fs_column)
    workloads = job.workloads()
    reasons = [n for n in notes(columns, workloads) if "failed (" not in n]
    return Report(job, columns, tuple(extra + reasons), runs.verified, tuple(runs.failures))


def _delete_prefix(s3: Any, bucket: str, prefix: str) -> None:
    """Remove a mode's objects once verified (the gateway's disk stays bounded)."""
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def _workdir(path: Path | None) -> AbstractContextManager[str | Path]:
    if path is None:
        return tempfile.TemporaryDirectory(prefix="squall-fuse-mpi-bench-")
    path.mkdir(parents=True, exist_ok=True)
    return nullcontext(path)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.fuse_mpi",
                                     description="MPI N-N and N-1 checkpoints: local directory "
                                                 "vs squall mount vs s3fs-fuse")
    parser.add_argument("--ranks", type=int, default=4, help="MPI ranks (default 4)")
    parser.add_argument("--size-mib", type=float, default=256,
                        help="MiB per rank and step (default 256)")
    parser.add_argument("--steps", type=int, default=1, help="checkpoints per run (default 1)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per mode and target; cells are medians (default 1)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds one mpirun may take (default 300)")
    parser.add_argument("--no-s3fs", action="store_true", help="skip the s3fs column")
    parser.add_argument("--workdir", type=Path,
                        help="keep data, mounts and logs here (default: a temporary directory "
                             "under $TMPDIR; not tmpfs, or the local column measures memory)")
    args = parser.parse_args(args_list)
    for name in ("ranks", "steps", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.size_mib <= 0 or args.timeout <= 0:
        parser.error("--size-mib and --timeout must be positive")
    job = Job(args.ranks, int(args.size_mib * MiB), args.steps)

    def progress(message: str) -> None:
        print(f"measuring: {message}", file=sys.stderr, flush=True)

    try:
        with _workdir(args.workdir) as workdir:
            report = run(job, Path(workdir), with_s3fs=not args.no_s3fs, repeat=args.repeat,
                         timeout=args.timeout, progress=progress)
    except RuntimeError as exc:
        print(f"fuse mpi bench: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fuse mpi bench: interrupted (mpirun stopped, mounts unmounted, gateway stopped)",
              file=sys.stderr)
        return 130
    print(f"$ python -m loadtests.bench.fuse_mpi {shlex.join(args_list)}".rstrip())
    steps = f"{job.steps} step" + ("s" if job.steps > 1 else "")
    print(f"MPI checkpoints: {job.ranks} ranks x {job.size / MiB:g} MiB x {steps}"
          + (f", median of {args.repeat} runs" if args.repeat > 1 else "") + "\n")
    print(report.markdown())
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
