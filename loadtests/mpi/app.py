"""A bulk-synchronous MPI application that computes between checkpoints (mpi4py + numpy).

Run as ``mpirun -n NP python -m loadtests.mpi.app DIRECTORY --segments S --block B
--transfer T [--mode nn|n1] [--iterations I] [--checkpoints K] [--manifest PATH]``:

* **state**: each rank owns a band of rows of a 2-D grid of float64 (:data:`COLUMNS` wide),
  ``S x B`` bytes, filled from a seeded generator;
* **compute**: Jacobi sweeps of the 5-point heat stencil, the halo rows exchanged with the
  neighbour ranks (``Sendrecv``) before every sweep;
* **checkpoints**: the initial state (the initial dump, step 0), then after every ``I/K``
  sweeps, each rank's band as the IOR model :class:`~loadtests.mpi.ior.IorModel` says: N-N,
  a file per rank (``pwrite`` of ``T`` bytes, ``fsync``, ``close``); N-1, one shared file
  opened with MPI-IO, each rank's blocks at IOR's segmented offsets (collective
  ``Write_at_all`` of ``T`` bytes, ``Sync``, ``Close``);
* ``--restart``: a new job reads the last checkpoint of ``--manifest`` back (``pread`` or
  ``Read_at_all``) and checks every block against the manifest's SHA-256.

``--no-io`` runs the compute alone (the baseline I x I_t). Every phase starts and ends at a
barrier; rank 0 times each (``MPI.Wtime``) and prints one JSON line. The SHA-256 of every
block is taken between phases, off the clock, and rank 0 writes them to ``--manifest``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loadtests.mpi.ior import MODES, IorModel

COLUMNS = 512  # grid columns: a row is 4 KiB
ROW = COLUMNS * 8


def initial_state(rank: int, rows: int) -> np.ndarray:
    """The rank's band with one halo row above and below."""
    grid = np.zeros((rows + 2, COLUMNS))
    grid[1:-1] = np.random.default_rng(1000 + rank).random((rows, COLUMNS))
    return grid


def sweep(grid: np.ndarray, out: np.ndarray) -> None:
    """One Jacobi sweep of the 5-point stencil into ``out`` (edges kept)."""
    out[1:-1, 1:-1] = 0.25 * (grid[:-2, 1:-1] + grid[2:, 1:-1]
                              + grid[1:-1, :-2] + grid[1:-1, 2:])
    out[1:-1, 0], out[1:-1, -1] = grid[1:-1, 0], grid[1:-1, -1]


def digests(model: IorModel, data: memoryview) -> list[str]:
    """SHA-256 of each block of a rank's checkpoint, segment by segment."""
    return [hashlib.sha256(data[s * model.block:(s + 1) * model.block]).hexdigest()
            for s in range(model.segments)]


def write_nn(model: IorModel, directory: str, step: int, rank: int, data: memoryview) -> None:
    fd = os.open(os.path.join(directory, model.path(step, rank)),
                 os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for at, start, n in model.transfers(rank):
            os.pwrite(fd, data[start:start + n], at)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_nn(model: IorModel, directory: str, step: int, rank: int, into: memoryview) -> None:
    fd = os.open(os.path.join(directory, model.path(step, rank)), os.O_RDONLY)
    try:
        for at, start, n in model.transfers(rank):
            got = os.preadv(fd, [into[start:start + n]], at)
            if got != n:
                raise OSError(f"short read at {at}: {got} of {n} bytes")
    finally:
        os.close(fd)


class Job:
    """One rank's side of the job: the communicator, the model, the clock of rank 0."""

    def __init__(self, model: IorModel, directory: str) -> None:
        from mpi4py import MPI  # initialises MPI; only the job needs it

        self.mpi = MPI
        self.comm = MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        if self.size != model.np:
            raise SystemExit(f"the model says np={model.np} but mpirun started {self.size}")
        if model.block % ROW:
            raise SystemExit(f"the block size must be a multiple of {ROW} bytes (a row)")
        self.model, self.directory = model, directory
        self.phases: list[tuple[str, float]] = []

    def timed(self, name: str, work: Callable[[], None]) -> None:
        """``work`` between two barriers; rank 0 keeps the time."""
        self.comm.Barrier()
        start = self.mpi.Wtime()
        work()
        self.comm.Barrier()
        self.phases.append((name, self.mpi.Wtime() - start))

    def checkpoint(self, step: int, data: memoryview) -> None:
        if self.model.mode == "nn":
            write_nn(self.model, self.directory, step, self.rank, data)
            return
        mpi = self.mpi
        fh = mpi.File.Open(self.comm, os.path.join(self.directory, self.model.path(step, 0)),
                           mpi.MODE_WRONLY | mpi.MODE_CREATE)
        try:
            for at, start, n in self.model.transfers(self.rank):
                fh.Write_at_all(at, data[start:start + n])
            fh.Sync()
        finally:
            fh.Close()

    def restore(self, step: int, into: memoryview) -> None:
        if self.model.mode == "nn":
            read_nn(self.model, self.directory, step, self.rank, into)
            return
        mpi = self.mpi
        fh = mpi.File.Open(self.comm, os.path.join(self.directory, self.model.path(step, 0)),
                           mpi.MODE_RDONLY)
        try:
            for at, start, n in self.model.transfers(self.rank):
                fh.Read_at_all(at, into[start:start + n])
        finally:
            fh.Close()

    def make_dirs(self, step: int) -> None:
        if self.rank == 0:
            parent = os.path.dirname(os.path.join(self.directory, self.model.path(step, 0)))
            os.makedirs(parent, exist_ok=True)
        self.comm.Barrier()


def run(job: Job, iterations: int, checkpoints: int, io: bool) -> dict[str, Any]:
    """Initial dump, then ``checkpoints`` rounds of compute and checkpoint."""
    model, comm, rank = job.model, job.comm, job.rank
    rows = model.rank_bytes // ROW
    grid, spare = initial_state(rank, rows), np.empty((rows + 2, COLUMNS))
    up = rank - 1 if rank > 0 else job.mpi.PROC_NULL
    down = rank + 1 if rank < job.size - 1 else job.mpi.PROC_NULL
    sums: dict[int, list[str]] = {}

    def dump(step: int) -> None:
        if not io:
            return
        job.make_dirs(step)
        data = grid[1:-1].data.cast("B")
        job.timed("init" if step == 0 else f"ckpt{step}", lambda: job.checkpoint(step, data))
        sums[step] = digests(model, data)

    def compute(count: int) -> None:
        nonlocal grid, spare
        for _ in range(count):
            comm.Sendrecv(grid[1], dest=up, recvbuf=grid[-1], source=down)
            comm.Sendrecv(grid[-2], dest=down, recvbuf=grid[0], source=up)
            sweep(grid, spare)
            grid, spare = spare, grid

    dump(0)
    every, done = (iterations // checkpoints, 0) if checkpoints else (iterations, 0)
    for k in range(1, max(checkpoints, 1) + 1):
        steps = every if k < checkpoints else iterations - done
        job.timed(f"compute{k}", lambda n=steps: compute(n))  # type: ignore[misc]
        done += steps
        if checkpoints:
            dump(k)
    gathered = comm.gather(sums, root=0) or []
    return {"digests": {str(step): [g[step] for g in gathered] for step in sums}}


def restart(job: Job, manifest: dict[str, Any]) -> int:
    """Read the manifest's last checkpoint back; blocks whose SHA-256 differs."""
    step = max(int(s) for s in manifest["digests"])
    buffer = bytearray(job.model.rank_bytes)
    view = memoryview(buffer)
    job.timed("restart", lambda: job.restore(step, view))
    want = manifest["digests"][str(step)][job.rank]
    bad = sum(a != b for a, b in zip(digests(job.model, view), want, strict=True))
    total: int = job.comm.allreduce(bad)
    return total


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtests.mpi.app",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("directory")
    p.add_argument("--mode", choices=MODES, default="nn", help="N-N (-F) or N-1 (shared)")
    p.add_argument("--segments", type=int, default=4, help="IOR -s")
    p.add_argument("--block", default="4m", help="IOR -b: bytes per rank and segment")
    p.add_argument("--transfer", default="1m", help="IOR -t: bytes per write or read call")
    p.add_argument("--iterations", type=int, default=60, help="I: stencil sweeps in all")
    p.add_argument("--checkpoints", type=int, default=3, help="K, after the initial dump")
    p.add_argument("--no-io", action="store_true", help="compute only (baseline I x I_t)")
    p.add_argument("--restart", action="store_true", help="read the last checkpoint back")
    p.add_argument("--manifest", type=Path, help="JSON of the blocks' SHA-256 (rank 0)")
    args = p.parse_args(argv)
    from mpi4py import MPI

    model = IorModel.parse(MPI.COMM_WORLD.Get_size(), args.segments, args.block,
                           args.transfer, args.mode)
    job = Job(model, args.directory)
    out: dict[str, Any] = {"mode": model.mode, "np": model.np, "segments": model.segments,
                           "block": model.block, "transfer": model.transfer,
                           "checkpoint_bytes": model.total_bytes}
    status = 0
    if args.restart:
        if args.manifest is None:
            p.error("--restart needs --manifest")
        bad = restart(job, json.loads(args.manifest.read_text()))
        out["bad_blocks"] = bad
        status = 1 if bad else 0
    else:
        result = run(job, args.iterations, args.checkpoints, not args.no_io)
        if job.rank == 0 and args.manifest is not None and not args.no_io:
            args.manifest.write_text(json.dumps({**out, **result}))
        out.update(iterations=args.iterations, checkpoints=args.checkpoints, io=not args.no_io)
    if job.rank == 0:
        out["phases"] = job.phases
        out["completion_s"] = sum(s for _, s in job.phases)
        print(json.dumps(out), flush=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
