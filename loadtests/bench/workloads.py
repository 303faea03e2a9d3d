"""Workload shapes (the ones MinIO's warp uses, so figures sit beside published results)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from backends.core.units import format_size

Kind = Literal["put", "get", "mixed"]
Unit = Literal["MiB/s", "ops/s"]

# warp mixed's default distribution
MIXED_WEIGHTS: dict[str, float] = {"get": 45.0, "stat": 30.0, "put": 15.0, "delete": 10.0}


@dataclass(frozen=True, slots=True)
class Workload:
    """One timed run: ``clients`` concurrent workers doing ``kind`` on ``size``-byte objects.

    A run stops after ``count`` operations or ``duration`` seconds, whichever comes first.
    GET and mixed runs first upload ``objects`` objects (not timed).
    """

    kind: Kind
    size: int
    clients: int
    count: int
    duration: float
    objects: int = 0
    unit: Unit = "MiB/s"

    @property
    def key(self) -> str:
        """Stable identifier, e.g. ``put-64MiB-c4`` (used by ``--workloads``)."""
        return f"{self.kind}-{format_size(self.size)}-c{self.clients}"

    @property
    def title(self) -> str:
        op = "GET/PUT/STAT/DELETE" if self.kind == "mixed" else self.kind.upper()
        return f"{op} {format_size(self.size)} x{self.clients}"


def standard_workloads(
    *,
    large_size: int,
    large_count: int,
    large_clients: Iterable[int],
    small_size: int,
    small_count: int,
    small_clients: int,
    mixed_size: int,
    mixed_count: int,
    mixed_clients: int,
    mixed_objects: int,
    duration: float,
) -> list[Workload]:
    """The standard set: large PUT/GET per concurrency, small PUT/GET, one mixed run."""
    out: list[Workload] = []
    kinds: tuple[Kind, ...] = ("put", "get")
    for clients in large_clients:
        for kind in kinds:
            out.append(
                Workload(
                    kind,
                    large_size,
                    clients,
                    large_count,
                    duration,
                    _objects(kind, clients, large_count),
                )
            )
    for kind in kinds:
        out.append(
            Workload(
                kind,
                small_size,
                small_clients,
                small_count,
                duration,
                _objects(kind, small_clients, small_count),
                "ops/s",
            )
        )
    out.append(
        Workload("mixed", mixed_size, mixed_clients, mixed_count, duration, mixed_objects, "ops/s")
    )
    return out


def _objects(kind: str, clients: int, count: int) -> int:
    # GET reads a small set of objects over and over (as warp does): two per client
    return 0 if kind == "put" else max(1, min(count, 2 * clients))


def select(workloads: list[Workload], keys: str) -> list[Workload]:
    """Keep the workloads whose key is in the comma-separated ``keys`` (all when empty)."""
    wanted = {k.strip() for k in keys.split(",") if k.strip()}
    if not wanted:
        return workloads
    unknown = wanted - {w.key for w in workloads}
    if unknown:
        known = ", ".join(w.key for w in workloads)
        raise ValueError(f"unknown workloads {sorted(unknown)}; known: {known}")
    return [w for w in workloads if w.key in wanted]
