"""Run one workload against one target and measure it.

A run has three steps: prepare (upload the objects GET and mixed read; not timed), the
timed phase (``clients`` coroutines share a budget of ``count`` operations and stop at
``duration``), and cleanup (delete what the run wrote; not timed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any, TypeVar

from loadtests.bench.targets import Target, TargetError
from loadtests.bench.workloads import MIXED_WEIGHTS, Workload
from loadtests.units import percentile

T = TypeVar("T")


@dataclass(slots=True)
class Measurement:
    """The outcome of one timed phase."""

    ops: int = 0
    nbytes: int = 0
    seconds: float = 0.0
    errors: int = 0
    first_error: str | None = None
    latencies: list[float] = field(default_factory=list, repr=False)
    # set directly by external tools (warp), which report rates rather than counts
    rates: tuple[float, float] | None = None  # (MiB/s, ops/s)
    #: the server's CPU seconds (user + system) over the timed phase, when known
    cpu_seconds: float | None = None
    #: the load generator's own CPU seconds over the timed phase (the built-in client)
    client_cpu_seconds: float | None = None

    @property
    def mib_s(self) -> float:
        if self.rates:
            return self.rates[0]
        return self.nbytes / (1 << 20) / self.seconds if self.seconds > 0 else 0.0

    @property
    def ops_s(self) -> float:
        if self.rates:
            return self.rates[1]
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    def value(self, unit: str) -> float:
        return self.mib_s if unit == "MiB/s" else self.ops_s

    @property
    def cpu_us_per_op(self) -> float | None:
        """Server CPU microseconds per operation (None when not measured)."""
        return self._per_op(self.cpu_seconds)

    @property
    def client_cpu_us_per_op(self) -> float | None:
        """The load generator's CPU microseconds per operation (None when not measured)."""
        return self._per_op(self.client_cpu_seconds)

    def _per_op(self, seconds: float | None) -> float | None:
        if seconds is None:
            return None
        ops = self.ops or (self.rates[1] * self.seconds if self.rates else 0)
        return seconds * 1e6 / ops if ops else None

    @property
    def p50_ms(self) -> float:
        return percentile(self.latencies, 50) * 1000

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies, 99) * 1000

    def error(self, exc: BaseException) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = f"{type(exc).__name__}: {exc}"


@lru_cache(maxsize=4)
def _data(size: int) -> bytes:
    return os.urandom(size)


async def _bounded(clients: int, jobs: Iterable[Callable[[], Awaitable[object]]]) -> None:
    gate = asyncio.Semaphore(max(1, clients))

    async def one(job: Callable[[], Awaitable[object]]) -> None:
        async with gate:
            await job()

    await asyncio.gather(*(one(job) for job in jobs))


class _Run:
    """State shared by the workers of one timed phase."""

    def __init__(self, target: Target, wl: Workload, prefix: str, pool: list[str]) -> None:
        self.target, self.wl, self.prefix = target, wl, prefix
        self.data = _data(wl.size)
        self.left = wl.count
        self.deadline = 0.0
        self.m = Measurement()
        self.pool = pool  # objects that exist: read from, deleted from, cleaned up at the end
        self.busy: dict[str, int] = {}  # key -> reads in flight on it
        self.rng = random.Random(1)

    def take(self) -> bool:
        if self.left <= 0 or time.perf_counter() >= self.deadline:
            return False
        self.left -= 1
        return True

    async def worker(self, n: int) -> None:
        i = 0
        while self.take():
            start = time.perf_counter()
            try:
                moved = await self.operation(n, i)  # not "+= await": that would lose updates
                self.m.nbytes += moved
                self.m.ops += 1
                self.m.latencies.append(time.perf_counter() - start)
            except TargetError as exc:  # counted and shown in the table, never fatal
                self.m.error(exc)
            i += 1

    async def operation(self, n: int, i: int) -> int:
        kind: str = self.wl.kind
        if kind == "mixed":
            kind = self.rng.choices(list(MIXED_WEIGHTS), weights=list(MIXED_WEIGHTS.values()))[0]
        if kind == "put":
            key = f"{self.prefix}/w{n}/o{i}"
            await self.target.put(key, self.data)
            self.pool.append(key)
            return self.wl.size
        if kind == "delete":
            idle = [k for k in self.pool if not self.busy.get(k)]
            if not idle:
                return 0
            key = self.rng.choice(idle)
            self.pool.remove(key)
            await self.target.delete(key)
            return 0
        key = self.rng.choice(self.pool)
        self.busy[key] = self.busy.get(key, 0) + 1
        try:
            if kind == "get":
                return await self.target.get(key)
            await self.target.stat(key)
            return 0
        finally:
            self.busy[key] -= 1


def run_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end on uvloop (asyncio's own loop where uvloop is missing)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


async def run_workload(target: Target, wl: Workload, prefix: str,
                       cpu: Callable[[], float] | None = None, *,
                       phase: tuple[Callable[[], object], Callable[[], object]] | None = None
                       ) -> Measurement:
    """Prepare, time and clean up one run of ``wl`` against ``target``; ``cpu`` returns
    the server's CPU seconds so far (sampled around the timed phase); ``phase`` is called
    (blocking) right before the timed phase and right after it (other processes' runs
    wait for each other there)."""
    data = _data(wl.size)
    prepared = [f"{prefix}/pre/o{i}" for i in range(wl.objects)]
    await _bounded(wl.clients, (partial(target.put, k, data) for k in prepared))
    run = _Run(target, wl, prefix, list(prepared))
    if phase is not None:
        phase[0]()
    start = time.perf_counter()
    run.deadline = start + wl.duration
    cpu_before = cpu() if cpu is not None else None
    client_before = time.process_time()
    await asyncio.gather(*(run.worker(n) for n in range(wl.clients)))
    run.m.seconds = time.perf_counter() - start
    run.m.client_cpu_seconds = time.process_time() - client_before
    if phase is not None:
        phase[1]()
    if cpu is not None and cpu_before is not None:
        run.m.cpu_seconds = cpu() - cpu_before
    await _bounded(wl.clients, (partial(_forget, target, k) for k in run.pool))
    return run.m


async def _forget(target: Target, key: str) -> None:
    with contextlib.suppress(TargetError):  # cleanup of a benchmark run is best effort
        await target.delete(key)
