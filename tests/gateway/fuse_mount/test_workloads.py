"""Storage benchmarks and an MPI job run unmodified on a real mount, checked for correctness.

fio (Debian ``fio``), bonnie++ (Debian ``bonnie++``) and an mpi4py job under ``mpirun``
(Debian ``openmpi-bin``, PyPI ``mpi4py``) each skip with the reason when missing. Sizes are
small: these check that the programs work on the mount, not how fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gateway.fuse_mount.conftest import MountProcess
from tests.gateway.fuse_mount.mpi_checkpoint import checkpoint_bytes, checkpoint_key
from tests.gateway.fuse_mount.mpi_n1_checkpoint import expected_bytes

RANKS = 2
STEPS = 3
CHECKPOINT_BASE = 256 * 1024


def need(program: str, package: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.skip(f"{program} is not installed (Debian package {package})")
    return path


def run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)


def test_fio_sequential_write_then_read_verify(mounted: MountProcess, s3) -> None:
    fio = need("fio", "fio")
    directory = mounted.path / "fio"
    directory.mkdir()
    result = run([
        fio, "--name=seqverify", f"--directory={directory}", "--rw=write", "--bs=1M",
        "--size=8M", "--numjobs=1", "--ioengine=psync", "--direct=0", "--verify=crc32c",
        "--do_verify=1", "--verify_fatal=1", "--verify_state_save=0", "--end_fsync=1",
        "--runtime=60",
        "--output-format=json",
    ])
    assert result.returncode == 0, (result.stdout[-4000:], result.stderr, mounted.log())
    report = json.loads(result.stdout[result.stdout.index("{"):])
    (job,) = report["jobs"]
    assert job["error"] == 0, job
    assert job["write"]["io_bytes"] == 8 * 1024 * 1024
    assert job["read"]["io_bytes"] == 8 * 1024 * 1024  # the verify pass read it all back
    assert job.get("total_err", 0) == 0
    head = s3.head_object(Bucket=mounted.bucket, Key="fio/seqverify.0.0")
    assert head["ContentLength"] == 8 * 1024 * 1024


@pytest.mark.timeout(240)
def test_bonnie_completes(mounted: MountProcess) -> None:
    """Block write, rewrite, block read and the seek phase, whose threads open, read and
    rewrite one file at once (-f: no per-character phase, whose single-byte writes take
    minutes through FUSE; -n 0: no phase of 1024+ small files). Twice (-x 2), each run
    bounded by a timeout so that a hang fails the test instead of stalling the suite."""
    bonnie = need("bonnie++", "bonnie++")
    directory = mounted.path / "bonnie"
    directory.mkdir()
    as_root = ["-u", "root"] if os.geteuid() == 0 else []  # bonnie++ refuses root without it
    try:
        result = run([bonnie, "-d", str(directory), "-s", "8M", "-r", "4", "-n", "0", "-f",
                      *as_root, "-x", "2", "-q"], timeout=180)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"bonnie++ hung: {exc}\n{mounted.log()}")
    assert result.returncode == 0, (result.stdout, result.stderr, mounted.log())
    assert result.stderr.strip() == "", result.stderr  # e.g. "Can't sync file."
    lines = [line for line in result.stdout.splitlines()
             if line.count(",") > 10 and not line.startswith("format_version")]
    assert len(lines) == 2, result.stdout  # one CSV result line per run
    assert all(line.split(",")[5] == "8M" for line in lines)
    assert list(directory.iterdir()) == []  # bonnie++ removed its files again


def mpirun_argv(ranks: int = RANKS) -> list[str]:
    mpirun = need("mpirun", "openmpi-bin")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed (PyPI package mpi4py)")
    version = run([mpirun, "--version"], timeout=30)
    argv = [mpirun, "-n", str(ranks)]
    if "Open MPI" in version.stdout + version.stderr:
        argv += ["--oversubscribe"]
        if os.geteuid() == 0:
            argv += ["--allow-run-as-root"]
    return argv


def test_mpi_ranks_checkpoint_into_the_mount(mounted: MountProcess, s3) -> None:
    argv = mpirun_argv()
    directory = mounted.path / "mpi"
    directory.mkdir()
    script = Path(__file__).with_name("mpi_checkpoint.py")
    result = run([*argv, sys.executable, str(script), str(directory), "--steps", str(STEPS),
                  "--size", str(CHECKPOINT_BASE)], timeout=180)
    assert result.returncode == 0, (result.stdout, result.stderr, mounted.log())
    assert f"checkpointed {RANKS} ranks x {STEPS} steps" in result.stdout
    listed = s3.list_objects_v2(Bucket=mounted.bucket, Prefix="mpi/rank-").get("Contents", [])
    expected = {f"mpi/{checkpoint_key(r, k)}" for r in range(RANKS) for k in range(STEPS)}
    assert {o["Key"] for o in listed if not o["Key"].endswith("/")} == expected  # no dir markers
    for rank in range(RANKS):
        for step in range(STEPS):
            key = f"mpi/{checkpoint_key(rank, step)}"
            body = s3.get_object(Bucket=mounted.bucket, Key=key)["Body"].read()
            assert body == checkpoint_bytes(rank, step, CHECKPOINT_BASE), key


N1_RANKS = 4
N1_RECORDS = 3
N1_BASE = 300_001


@pytest.mark.timeout(240)
def test_mpi_ranks_write_one_shared_file(mounted: MountProcess, s3) -> None:
    """N-1: four ranks write interleaved, odd-sized, disjoint ranges of one file with
    MPI-IO's collective Write_at_all; the object holds every rank's bytes in place."""
    argv = mpirun_argv(N1_RANKS)
    directory = mounted.path / "mpi-n1"
    directory.mkdir()
    script = Path(__file__).with_name("mpi_n1_checkpoint.py")
    result = run([*argv, sys.executable, str(script), str(directory / "ckpt.bin"),
                  "--records", str(N1_RECORDS), "--size", str(N1_BASE)], timeout=200)
    assert result.returncode == 0, (result.stdout, result.stderr, mounted.log())
    expected = expected_bytes(N1_RANKS, N1_RECORDS, N1_BASE)
    assert f"{N1_RANKS} ranks x {N1_RECORDS} records: {len(expected)} bytes" in result.stdout
    body = s3.get_object(Bucket=mounted.bucket, Key="mpi-n1/ckpt.bin")["Body"].read()
    assert len(body) == len(expected)
    assert body == expected
    assert (directory / "ckpt.bin").read_bytes() == expected  # and through the mount
