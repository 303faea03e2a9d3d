"""Starting MPI jobs: ``mpirun`` argv for this machine, a run with a timeout that stops
the whole job (its process group), and the JSON line a job's rank 0 prints."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def mpi_unavailable() -> str | None:
    """Why an MPI job cannot run here, or None."""
    if shutil.which("mpirun") is None:
        return "mpirun is not installed (Debian package openmpi-bin)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (PyPI package mpi4py)"
    return None


def mpirun_argv(ranks: int) -> list[str]:
    """``mpirun -n RANKS``; Open MPI also ``--oversubscribe`` (more ranks than cores) and,
    as root, ``--allow-run-as-root``."""
    argv = ["mpirun", "-n", str(ranks)]
    version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True,
                             timeout=30, check=False)
    if "Open MPI" in version.stdout + version.stderr:
        argv.append("--oversubscribe")
        if os.geteuid() == 0:
            argv.append("--allow-run-as-root")
    return argv


def stop_job(proc: subprocess.Popen[str]) -> None:
    """Stop mpirun and its ranks (the process group it leads), SIGKILL if they linger."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(15)
            return
        except subprocess.TimeoutExpired:
            continue


def run_mpi(argv: Sequence[str], *, log_path: Path, timeout: float,
            env: Mapping[str, str] | None = None, cwd: Path | None = None) -> dict[str, Any]:
    """Run ``argv`` (an ``mpirun`` line) to its end; the last JSON line it printed.
    RuntimeError (with the log's tail) when it fails or outlives ``timeout``."""
    with open(log_path, "a") as log:
        log.write(f"$ {shlex.join(argv)}\n")
        log.flush()
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=log, text=True,
                                env=dict(env) if env is not None else None, cwd=cwd,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"mpirun timed out after {timeout:g} s (log: {log_path})") from None
        finally:
            stop_job(proc)
        log.write(out)
    if proc.returncode != 0:
        tail = log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"mpirun exited with {proc.returncode}:\n{tail}")
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            result: dict[str, Any] = json.loads(line)
            return result
    raise RuntimeError(f"mpirun printed no JSON line: {out[-500:]!r}")
