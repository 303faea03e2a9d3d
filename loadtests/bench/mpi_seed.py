"""The adaptive-caching seed's Tables I-IV and the burst-buffer headline, with a real MPI
application and a distributed object store.

``python -m loadtests.bench.mpi_seed`` (root: network namespaces) starts the distributed,
erasure-coded MinIO of ``python -m loadtests.minio`` and runs itself again inside the
cluster's client namespace (``--store URL``), where it measures, one after the other:

* the application without I/O (I x I_t, the seed's baseline);
* **static-slow**: ``squall mount`` on a gateway without cache (``--cache-size 0``): every
  checkpoint goes straight to the store;
* **static-fast**: a static cache as large as the backing store (N) in front of it;
* **adaptive**: ``--cache-mode elastic``, volumes attached per checkpoint burst.

The application is :mod:`loadtests.mpi.app` (stencil sweeps between N-N or N-1
checkpoints of an IOR model). Prices as the seed's cost model: a disk costs its bandwidth
times its size N per second; B_b is the store's checkpoint bandwidth and B_c the cache's,
both as calibrated here. Predictions use ``gateway.cost.predict`` on points calibrated with
the application's own checkpoint phase, and the compute phase after it (P: the compute
lost while the cache drains the checkpoint beside it). ``--repeat N`` runs it all N times
and prints each figure as the median of the runs and its spread (min-max).
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gateway.commands.cost import whole_number
from loadtests.bench.mpi_seed_report import Prices, Run, render
from loadtests.bench.mpi_seed_runs import (
    Outcome,
    Shape,
    Store,
    clear_store,
    compute_baseline,
    run_configuration,
)
from loadtests.mpi.ior import MODES, IorModel

NAMES = ("static-slow", "static-fast", "adaptive")


def gateway_args(name: str, backend_size: int, initial_cache: int,
                 inactivity_delay_s: float, store_mb_s: float = 0.0) -> list[str]:
    """The gateway's flags; adaptive declares the store's bandwidth B_b as static-slow
    calibrated it (the writeback and the cost meter measure against it), without
    throttling the store to it."""
    common = ["--cost-backend-size-gb", f"{backend_size / 1e9:g}",
              "--inactivity-delay", f"{inactivity_delay_s:g}"]
    if name == "static-slow":
        return ["--cache-size", "0", *common]
    if name == "static-fast":
        return ["--cache-size", str(backend_size), *common]
    return ["--cache-mode", "elastic", "--cache-size", str(initial_cache),
            "--backend-bandwidth-estimate", f"{store_mb_s:.0f}MB/s", *common]


def run_once(args: argparse.Namespace, shape: Shape, store: Store, work: Path,
             prefix: str) -> Run:
    """The baseline and every configuration, one after the other, in ``work``; Squall's
    buckets named ``<prefix>app-<configuration>``, deleted from the store afterwards."""
    n = int(args.backend_size_gb * 1e9)
    initial = int(args.initial_cache_mb * 1e6)
    outcomes: list[Outcome] = []
    print("measuring: the application without I/O", file=sys.stderr, flush=True)
    baseline = compute_baseline(shape, work / "baseline", timeout=args.timeout)
    store_mb_s = 0.0
    for name in NAMES:
        gw = gateway_args(name, n, initial, args.inactivity_delay, store_mb_s)
        print(f"measuring: {name} ({' '.join(gw)})", file=sys.stderr, flush=True)
        outcome = run_configuration(name, gw, store, shape, work / name,
                                    calibrate_at=[0] if name == "adaptive" else [None],
                                    timeout=args.timeout, bucket_prefix=prefix,
                                    # without a cache nothing drains beside the compute
                                    first_phase_s=None if name == "static-slow"
                                    else baseline.first_phase_s)
        print(f"  T = {outcome.completion_s:.1f} s, restart {outcome.restart_s:.2f} s; "
              + ", ".join(f"{p} {s:.1f}" for p, s in outcome.phases),
              file=sys.stderr, flush=True)
        outcomes.append(outcome)
        if name == "static-slow":
            store_mb_s = outcome.points[0].throughput_mb_s
    clear_store(store, prefix)
    shutil.rmtree(work, ignore_errors=True)  # the caches of this run: not needed any more
    prices = Prices.calibrated(outcomes, backend_size_gb=args.backend_size_gb)
    return Run(tuple(outcomes), prices, baseline.total_s)


def inner(args: argparse.Namespace, shape: Shape) -> int:
    """Every measurement, ``--repeat`` times, against ``--store`` (in the namespace where
    it exists); run ``i``'s buckets are ``r<i>-app-<configuration>``."""
    store = Store(args.store, args.access_key, args.secret_key, args.store_bucket)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="squall-mpi-seed-") as tmp:
        for i in range(1, args.repeat + 1):
            print(f"run {i} of {args.repeat}", file=sys.stderr, flush=True)
            runs.append(run_once(args, shape, store, Path(tmp) / f"run{i}", f"r{i}-"))
    print(render(shape, runs, initial_cache_mb=args.initial_cache_mb,
                 inactivity_delay_s=args.inactivity_delay))
    return 0


def outer(argv: Sequence[str]) -> int:
    """Start the distributed MinIO, run :func:`inner` in its client namespace, stop it."""
    from loadtests.minio.cluster import MinioCluster, unavailable
    from loadtests.minio.install import missing_reason

    reason = unavailable() or missing_reason()
    if reason is not None:
        print(f"mpi seed bench: {reason}", file=sys.stderr)
        return 2
    access, secret = "squall" + secrets.token_hex(4), secrets.token_hex(16)
    bucket = "squall-store"
    with tempfile.TemporaryDirectory(prefix="squall-mpi-seed-minio-") as tmp, \
            MinioCluster(Path(tmp), access, secret) as cluster:
        assert cluster.client is not None
        env = cluster.client_env()
        cluster.client.run([sys.executable, "-c", _MAKE_BUCKET, cluster.endpoint, access,
                            secret, bucket], env=env, check=True)
        print(f"store: MinIO {cluster.node_count} nodes x {cluster.drive_count} drives "
              "(erasure-coded), each node in a network namespace of its own",
              file=sys.stderr, flush=True)
        done = cluster.client.run(
            [sys.executable, "-m", "loadtests.bench.mpi_seed", *argv, "--store",
             cluster.endpoint, "--store-bucket", bucket, "--access-key", access,
             "--secret-key", secret], env=env, check=False)
        return done.returncode


_MAKE_BUCKET = """
import sys, boto3
endpoint, access, secret, bucket = sys.argv[1:]
boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access,
             aws_secret_access_key=secret, region_name="us-east-1").create_bucket(Bucket=bucket)
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m loadtests.bench.mpi_seed",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--mode", choices=MODES, default="nn", help="N-N (file per rank) or N-1")
    p.add_argument("--np", type=int, default=4, help="MPI ranks (IOR np)")
    p.add_argument("--segments", type=int, default=4, help="IOR -s")
    p.add_argument("--block", default="8m", help="IOR -b, bytes per rank and segment")
    p.add_argument("--transfer", default="1m", help="IOR -t, bytes per call")
    p.add_argument("--iterations", type=int, default=400, help="I, stencil sweeps in all")
    p.add_argument("--checkpoints", type=whole_number(1), default=5,
                   help="K, after the initial dump")
    p.add_argument("--backend-size-gb", type=float, default=1.0, help="N, GB")
    p.add_argument("--initial-cache-mb", type=float, default=256, help="M(S_i), MB")
    p.add_argument("--inactivity-delay", type=float, default=1.0, help="ID, seconds")
    p.add_argument("--repeat", type=whole_number(1), default=5,
                   help="runs of every configuration: each figure is their median, with "
                        "its spread (min-max)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per mpirun")
    p.add_argument("--store", help="S3 endpoint of the store (skips starting MinIO)")
    p.add_argument("--store-bucket", default="squall-store")
    p.add_argument("--access-key", default="")
    p.add_argument("--secret-key", default="")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    args = p.parse_args(argv)
    try:
        shape = Shape(IorModel.parse(args.np, args.segments, args.block, args.transfer,
                                     args.mode), args.iterations, args.checkpoints)
    except ValueError as exc:
        p.error(str(exc))
    if args.store:
        return inner(args, shape)
    return outer(argv)


if __name__ == "__main__":
    sys.exit(main())
