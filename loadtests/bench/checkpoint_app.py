"""A bulk-synchronous checkpointing application, scaled down (seed: adaptive caching, IV).

``n`` writer processes start together, each dumps its initial state (S_i / n), then runs
I iterations of I_t seconds of "compute" (a sleep: the two cores are for the gateway),
writing its share of a checkpoint (S_c / n) after every I/K iterations. Every phase ends
at a barrier of all writers, as an MPI code's would. Objects of ``object_size`` are
written one after the other by each writer (UNSIGNED-PAYLOAD, like SDKs over TLS).
While it runs, a sampler polls ``/_squall/status`` to record I/O activity, the attached
cache size and the accumulated cost (the seed's Fig. 2b and 3).
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Self

import httpx

from gateway.client.credentials import credentials_from_env
from gateway.client.signing import status_headers
from gateway.client.sigv4 import object_path
from gateway.cost.calibrate import GatewayClient, write_dataset

MB = 1_000_000


@dataclass(frozen=True, slots=True)
class AppShape:
    writers: int  # n
    init_bytes: int  # S_i, all writers together
    checkpoint_bytes: int  # S_c, all writers together
    checkpoints: int  # K
    iterations: int  # I
    iteration_s: float  # I_t
    object_size: int


@dataclass
class AppRun:
    completion_s: float  # T, measured: first barrier to the last
    started_wall: float
    phases: list[tuple[str, float]]  # (phase, seconds) as seen by the coordinator
    samples: list[dict[str, float]] = field(default_factory=list)


def _writer(rank: int, endpoint: str, bucket: str, shape: AppShape,
            barrier: Any, env: dict[str, str]) -> None:
    import os

    os.environ.update(env)
    gw = GatewayClient(endpoint, credentials_from_env())
    per_init = shape.init_bytes // shape.writers
    per_ckpt = shape.checkpoint_bytes // shape.writers
    every = shape.iterations // shape.checkpoints if shape.checkpoints else shape.iterations
    gw.request("PUT", object_path(bucket, f"warmup/r{rank:03d}"), content=b"w")
    barrier.wait()  # connections are open: the clock starts
    write_dataset(gw, bucket, f"init/r{rank:03d}", per_init, writers=1,
                  object_size=shape.object_size)
    barrier.wait()
    done = 0
    for k in range(1, shape.checkpoints + 1):
        steps = every if k < shape.checkpoints else shape.iterations - done
        time.sleep(steps * shape.iteration_s)
        done += steps
        barrier.wait()  # compute over, everyone checkpoints at once
        write_dataset(gw, bucket, f"ckpt{k}/r{rank:03d}", per_ckpt, writers=1,
                      object_size=shape.object_size)
        barrier.wait()


class Sampler:
    """Polls the gateway status every ``interval_s`` in a thread."""

    def __init__(self, endpoint: str, interval_s: float = 0.5) -> None:
        self._url = f"{endpoint}/_squall/status"
        self._interval = interval_s
        self._stop = threading.Event()
        self.samples: list[dict[str, float]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self._stop.is_set():
                try:
                    s = client.get(self._url, headers=status_headers(self._url)).json()
                except (httpx.HTTPError, ValueError):
                    s = {}
                self.samples.append({
                    "at": time.time(),
                    "ingest_bytes_total": float(s.get("ingest_bytes_total", 0)),
                    "flush_bytes_total": float(s.get("flush_bytes_total", 0)),
                    "cache_size_bytes": float(s.get("cache_capacity_bytes", 0)),
                    "cache_used_bytes": float(s.get("cache_used_bytes", 0)),
                    "dirty_bytes": float(s.get("dirty_bytes", 0))})
                self._stop.wait(self._interval)


def run_app(endpoint: str, bucket: str, shape: AppShape, env: dict[str, str]) -> AppRun:
    """Run the application against ``endpoint`` (the bucket must exist)."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(shape.writers + 1)
    procs = [ctx.Process(target=_writer, args=(r, endpoint, bucket, shape, barrier, env))
             for r in range(shape.writers)]
    for p in procs:
        p.start()
    phases: list[tuple[str, float]] = []
    try:
        barrier.wait(timeout=120)
        started, wall = time.perf_counter(), time.time()
        mark = started
        names = ["init"]
        for k in range(1, shape.checkpoints + 1):
            names += [f"compute{k}", f"ckpt{k}"]
        for name in names:
            barrier.wait(timeout=1800)
            now = time.perf_counter()
            phases.append((name, now - mark))
            mark = now
        completion = time.perf_counter() - started
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    failed = [p.exitcode for p in procs if p.exitcode]
    if failed:
        raise RuntimeError(f"writer processes failed with exit codes {failed}")
    return AppRun(completion, wall, phases)
