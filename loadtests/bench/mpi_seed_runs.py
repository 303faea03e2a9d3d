"""One configuration of the MPI seed benchmark (:mod:`loadtests.bench.mpi_seed`), run in the
namespace where the object store's endpoint exists.

A Squall gateway in front of the store (``--backend s3:URL?bucket=...``), ``squall mount``
of one of its buckets, then: the application's run (:mod:`loadtests.mpi.app`), the wait
until everything is on the store (and an elastic volume detached), a restart read by a new
job through a fresh mount, the last checkpoint's blocks checked on the store itself, and
the calibration of B(x) and D(x) with the application's own checkpoint phase (the IOR
model alone, no checkpoint after it) at the cache sizes the run used, and of P(x) with the
compute phase that follows it while the cache drains.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from gateway.client.credentials import Credentials
from gateway.cost.calibrate import GatewayClient, attached_seconds, wait_quiet
from gateway.cost.calibration import CalibrationPoint
from loadtests.bench.fuse import ACCESS_KEY, SECRET_KEY, mounted, squall_mount_argv
from loadtests.bench.server import squall_server
from loadtests.mpi.ior import IorModel
from loadtests.mpi.launch import mpirun_argv, run_mpi

MB, GB = 1_000_000, 1_000_000_000
N1_GLOB = "*/ckpt-*.bin"  # --shared-files of the mount: the N-1 checkpoint files


@dataclass(frozen=True, slots=True)
class Store:
    """The shared object store: endpoint, credentials, bucket Squall maps its buckets into."""

    endpoint: str
    access_key: str
    secret_key: str
    bucket: str


@dataclass(frozen=True, slots=True)
class Shape:
    """The application: its IOR model, I sweeps in all, K checkpoints after the dump."""

    model: IorModel
    iterations: int
    checkpoints: int

    def app_args(self) -> list[str]:
        m = self.model
        return ["--mode", m.mode, "--segments", str(m.segments), "--block", str(m.block),
                "--transfer", str(m.transfer)]


@dataclass
class Outcome:
    """What one configuration measured."""

    name: str
    completion_s: float
    phases: list[tuple[str, float]]
    restart_s: float
    cache_gb_s: float
    volumes: list[dict[str, Any]]
    points: list[CalibrationPoint] = field(default_factory=list)
    verified_blocks: int = 0

    def phase(self, prefix: str) -> list[float]:
        return [s for n, s in self.phases if n.startswith(prefix)]


def gateway_env(store: Store) -> dict[str, str]:
    return {"SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY,
            "SQUALL_UPSTREAM_ACCESS_KEY": store.access_key,
            "SQUALL_UPSTREAM_SECRET_KEY": store.secret_key}


def app_argv(shape: Shape, directory: Path, *extra: str) -> list[str]:
    return [*mpirun_argv(shape.model.np), sys.executable, "-m", "loadtests.mpi.app",
            str(directory), *shape.app_args(), *extra]


@contextmanager
def mount(endpoint: str, bucket: str, shape: Shape, work: Path) -> Iterator[Path]:
    options = ["--shared-files", N1_GLOB] if shape.model.mode == "n1" else []
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "SQUALL_"))}
    env.update(SQUALL_ACCESS_KEY=ACCESS_KEY, SQUALL_SECRET_KEY=SECRET_KEY)
    point = work / "mnt"
    with mounted(squall_mount_argv(endpoint, bucket, point, options), point,
                 work / "mount.log", env=env) as root:
        yield root


def verify_on_store(store: Store, bucket: str, shape: Shape, manifest: dict[str, Any],
                    prefix: str) -> int:
    """Check every block of the manifest's last checkpoint in the store's own objects
    (``<bucket>/<prefix><file>`` of the shared bucket); the number of blocks checked."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=store.endpoint, aws_access_key_id=store.access_key,
                      aws_secret_access_key=store.secret_key, region_name="us-east-1")
    m = shape.model
    step = max(int(s) for s in manifest["digests"])
    want = manifest["digests"][str(step)]
    bodies: dict[str, bytes] = {}
    checked = 0
    for rank in range(m.np):
        key = f"{bucket}/{prefix}{m.path(step, rank)}"
        if key not in bodies:
            bodies = {key: s3.get_object(Bucket=store.bucket, Key=key)["Body"].read()}
        body = bodies[key]
        for seg in range(m.segments):
            at = m.block_offset(rank, seg)
            if hashlib.sha256(body[at:at + m.block]).hexdigest() != want[rank][seg]:
                raise RuntimeError(f"s3://{store.bucket}/{key}: rank {rank}'s block {seg} "
                                   "differs from what the application wrote")
            checked += 1
    return checked


def run_configuration(name: str, args: Sequence[str], store: Store, shape: Shape,
                      work: Path, *, calibrate_at: Sequence[int | None],
                      timeout: float = 300.0, bucket_prefix: str = "",
                      first_phase_s: float | None = None) -> Outcome:
    """Measure one configuration in Squall's bucket ``<bucket_prefix>app-<name>``;
    ``calibrate_at``: the cache sizes of the calibration points (None for a gateway
    without elastic volumes; 0: take the run's volume sizes); ``first_phase_s``: the first
    compute phase without I/O (:class:`Baseline`), to calibrate the compute slowdown while
    a cache drains (None: nothing drains, P = 0)."""
    work.mkdir(parents=True, exist_ok=True)
    log = work / "mpi.log"
    gw_args = ["--backend", f"s3:{store.endpoint}?bucket={store.bucket}", *args]
    bucket = f"{bucket_prefix}app-{name}"
    with squall_server(name, gw_args, work, gateway_env(store)) as server:
        gw = GatewayClient(server.endpoint, Credentials(ACCESS_KEY, SECRET_KEY))
        gw.request("PUT", f"/{bucket}")
        before = wait_quiet(gw, 120)
        started = time.time()
        manifest_path = work / "manifest.json"
        with mount(server.endpoint, bucket, shape, work) as root:
            result = run_mpi(app_argv(shape, root / "run", "--iterations",
                                      str(shape.iterations), "--checkpoints",
                                      str(shape.checkpoints), "--manifest", str(manifest_path)),
                             log_path=log, timeout=timeout)
        after = wait_quiet(gw, 600)
        volumes = [b for b in after.get("elastic", {}).get("bursts", [])
                   if b["attached_at"] >= started - 1]
        cache_gb_s = (after.get("cost", {}).get("cache_gb_seconds", 0.0)
                      - before.get("cost", {}).get("cache_gb_seconds", 0.0))
        with mount(server.endpoint, bucket, shape, work) as root:  # a new job, a new mount
            restarted = run_mpi(app_argv(shape, root / "run", "--restart", "--manifest",
                                         str(manifest_path)), log_path=log, timeout=timeout)
        manifest = json.loads(manifest_path.read_text())
        verified = verify_on_store(store, bucket, shape, manifest, "run/")
        outcome = Outcome(name, float(result["completion_s"]),
                          [(n, float(s)) for n, s in result["phases"]],
                          float(restarted["completion_s"]), cache_gb_s, volumes,
                          verified_blocks=verified)
        sizes = [m for m in calibrate_at if m != 0]
        if 0 in calibrate_at:
            sizes += sorted({int(v["size_bytes"]) for v in volumes})
        for i, m in enumerate(sizes):
            outcome.points.append(_calibration_point(gw, shape, server.endpoint, bucket, work,
                                                     f"cal-{i}", m, log, timeout,
                                                     first_phase_s))
    return outcome


def clear_store(store: Store, prefix: str) -> int:
    """Delete the store's objects under ``prefix`` (a finished run's buckets, so repeated
    runs do not fill the store's drives); how many were deleted."""
    s3 = boto3.client("s3", endpoint_url=store.endpoint, aws_access_key_id=store.access_key,
                      aws_secret_access_key=store.secret_key, region_name="us-east-1")
    deleted = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=store.bucket,
                                                             Prefix=prefix):
        keys = [o["Key"] for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=store.bucket, Delete={
                "Objects": [{"Key": k} for k in keys], "Quiet": True})
            deleted += len(keys)
    return deleted


def _calibration_point(gw: GatewayClient, shape: Shape, endpoint: str, bucket: str,
                       work: Path, directory: str, m: int | None, log: Path,
                       timeout: float, first_phase_s: float | None) -> CalibrationPoint:
    """B_M(S_c), D_M(S_c), P_M(S_c): one checkpoint phase of the application alone on a
    quiet gateway whose next elastic volume is ``m`` bytes, then (with ``first_phase_s``)
    the compute phase that follows it, against the same phase without I/O: the first of
    a new job both times, so the job's warm-up is in both."""
    wait_quiet(gw, 600)
    if m is not None:
        gw.request("POST", "/_squall/elastic/next-size", params={"size": str(m)})
    steps = shape.iterations // max(shape.checkpoints, 1) if first_phase_s is not None else 0
    since = time.time()
    with mount(endpoint, bucket, shape, work) as root:
        result = run_mpi(app_argv(shape, root / directory, "--iterations", str(steps),
                                  "--checkpoints", "0"), log_path=log, timeout=timeout)
    phases = dict(result["phases"])
    status = wait_quiet(gw, 600)
    attach = attached_seconds(status, since - 1.0) if m is not None else 0.0
    x = shape.model.total_bytes
    # compute cannot gain from a drain: a phase faster than without I/O is noise
    slowdown = 0.0 if first_phase_s is None else max(0.0, phases["compute1"] - first_phase_s)
    return CalibrationPoint(cache_gb=(m or 0) / GB, dataset_gb=x / GB,
                            throughput_mb_s=x / MB / phases["init"], attach_s=attach,
                            compute_slowdown_s=slowdown)


@dataclass(frozen=True, slots=True)
class Baseline:
    """The application without I/O: I x I_t, and its first compute phase (I/K sweeps)."""

    total_s: float
    first_phase_s: float


def compute_baseline(shape: Shape, work: Path, timeout: float = 300.0) -> Baseline:
    """The seed's baseline run: the application without I/O."""
    work.mkdir(parents=True, exist_ok=True)
    result = run_mpi(app_argv(shape, work / "none", "--iterations", str(shape.iterations),
                              "--checkpoints", str(shape.checkpoints), "--no-io"),
                     log_path=work / "baseline.log", timeout=timeout)
    return Baseline(float(result["completion_s"]), float(dict(result["phases"])["compute1"]))
