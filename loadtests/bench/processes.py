"""One workload driven from several client processes at once (``--client-processes``).

A single Python process takes bodies on one core; where it is the bound (large GETs at 4
clients on a 2-core machine), more processes measure the server instead. Each process
runs ``clients / processes`` of the workload's clients with its share of the operation
budget and of the objects to read; the processes prepare, then start and end their timed
phases together (barriers), and the server's CPU is sampled at those two moments. The
figures are added up (operations, bytes, latencies, CPU); the phase lasts from the first
barrier to the second.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
import uuid
from collections.abc import Callable
from typing import Any

from gateway.client.credentials import Credentials
from gateway.client.sigv4 import Signer
from loadtests.bench.engine import Measurement, run_loop, run_workload
from loadtests.bench.targets import S3Target, TargetError
from loadtests.bench.workloads import Workload


def share(wl: Workload, processes: int, index: int) -> Workload:
    """Process ``index``'s part of ``wl``: its clients, operations and objects (no more
    processes than clients)."""

    def part(total: int) -> int:
        return total // processes + (1 if index < total % processes else 0)

    return dataclasses.replace(wl, clients=part(wl.clients), count=part(wl.count),
                               objects=part(wl.objects) if wl.objects else 0)


def merge(parts: list[Measurement], seconds: float) -> Measurement:
    """One measurement of the processes' phases, which lasted ``seconds`` together."""
    merged = Measurement(seconds=seconds, client_cpu_seconds=sum(
        m.client_cpu_seconds or 0.0 for m in parts))
    for m in parts:
        merged.ops += m.ops
        merged.nbytes += m.nbytes
        merged.errors += m.errors
        merged.first_error = merged.first_error or m.first_error
        merged.latencies.extend(m.latencies)
    return merged


def run_processes(endpoint: str, credentials: Credentials, region: str, bucket: str,
                  wl: Workload, processes: int,
                  cpu: Callable[[], float] | None = None) -> Measurement:
    """Run ``wl`` from ``processes`` client processes (at most one per client) on
    ``bucket`` (created if need be); ``cpu`` is the server's CPU."""
    processes = max(1, min(processes, wl.clients))
    context = multiprocessing.get_context("spawn")
    marks = context.Array("d", 4)  # server CPU and clock at the start and the end
    start = context.Barrier(processes, action=_Mark(marks, 0, cpu))
    end = context.Barrier(processes, action=_Mark(marks, 2, cpu))
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    results = context.Queue()
    children = [context.Process(target=_child, args=(
        results, endpoint, credentials, region, bucket, share(wl, processes, i),
        f"{prefix}/p{i}", start, end)) for i in range(processes)]
    for child in children:
        child.start()
    try:
        parts = [results.get() for _ in children]
    finally:
        for child in children:
            child.join(timeout=60)
            if child.is_alive():
                child.kill()
    failed = [p for p in parts if isinstance(p, str)]
    if failed:
        raise TargetError(failed[0])
    merged = merge([p for p in parts if isinstance(p, Measurement)], marks[3] - marks[1])
    if cpu is not None:
        merged.cpu_seconds = marks[2] - marks[0]
    return merged


class _Mark:
    """A barrier's action: note the server's CPU and the clock (in whichever process
    passes the barrier last)."""

    def __init__(self, marks: Any, at: int, cpu: Callable[[], float] | None) -> None:
        self._marks, self._at, self._cpu = marks, at, cpu

    def __call__(self) -> None:
        self._marks[self._at] = self._cpu() if self._cpu is not None else 0.0
        self._marks[self._at + 1] = time.perf_counter()


def _child(results: Any, endpoint: str, credentials: Credentials, region: str, bucket: str,
           wl: Workload, prefix: str, start: Any, end: Any) -> None:
    """One client process: its measurement, or why it failed, goes to ``results``."""

    async def main() -> Measurement:
        target = S3Target(endpoint, bucket, Signer(credentials, region), clients=wl.clients)
        try:
            await target.create_bucket()  # the first one makes it, the others find it
            return await run_workload(target, wl, prefix, phase=(start.wait, end.wait))
        finally:
            await target.close()

    try:
        results.put(run_loop(main()))
    except Exception as exc:  # noqa: BLE001 - reported by the parent; the others let go
        start.abort()
        end.abort()
        results.put(f"client process failed: {type(exc).__name__}: {exc}")

