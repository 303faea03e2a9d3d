"""The MPI checkpoint job of the FUSE MPI benchmark (``loadtests.bench.fuse_mpi``).

Run as ``mpirun -n N python -m loadtests.bench.mpi_writer MODE DIRECTORY --size BYTES
[--steps K] [--content-dir DIR]``:

* ``nn`` (N-N): rank ``i`` writes ``DIRECTORY/rank-i/step-k.bin`` (the bytes of the N-N test
  job, ``checkpoint_bytes(i, k, BYTES)``) in 1 MiB ``write()`` calls, fsyncs and closes it;
  all ranks meet at a barrier after every step.
* ``n1`` (N-1): all ranks open ``DIRECTORY/step-k.bin`` with MPI-IO; rank ``i`` owns one
  contiguous range (``layout(N, 1, BYTES)`` of the N-1 test job) and writes it with
  collective ``Write_at_all`` calls of about 1 MiB, then ``Sync`` and ``Close``.

Each rank has its bytes in memory before the clock starts: read from ``--content-dir``
(files :func:`content_name` written beforehand by the driver) or generated. Rank 0 measures
from a barrier before the first open to a barrier after the last close (``MPI.Wtime``) and
prints one JSON line ``{"mode", "ranks", "steps", "bytes", "seconds"}``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path

from loadtests.mpi.content import (
    checkpoint_bytes,
    checkpoint_key,
    checkpoint_size,
    layout,
    range_bytes,
)

MiB = 1024 * 1024
MODES = ("nn", "n1")


def n1_file(step: int) -> str:
    """The shared file of one N-1 step, relative to the job's directory."""
    return f"step-{step}.bin"


def n1_range(ranks: int, rank: int, size: int) -> tuple[int, int]:
    """(offset, length) of ``rank``'s contiguous range in an N-1 file."""
    for r, offset, length in layout(ranks, 1, size):
        if r == rank:
            return offset, length
    raise ValueError(f"rank {rank} is not below {ranks}")


def n1_calls(size: int) -> int:
    """Collective writes per rank and step: the same count on every rank (collective calls
    must match), each about 1 MiB."""
    return max(1, round(size / MiB))


def pieces(length: int, count: int) -> list[tuple[int, int]]:
    """``length`` cut into ``count`` near-equal (start, length) pieces."""
    step, extra = divmod(length, count)
    out, start = [], 0
    for i in range(count):
        n = step + (1 if i < extra else 0)
        out.append((start, n))
        start += n
    return out


def content_name(mode: str, rank: int, step: int) -> str:
    """File name of one rank's bytes in a content directory (N-1 steps share their bytes)."""
    return f"{mode}-rank-{rank}-step-{step if mode == 'nn' else 0}.bin"


def content(mode: str, ranks: int, rank: int, step: int, size: int) -> bytes:
    """The deterministic bytes ``rank`` writes at ``step``, from the test jobs' generators."""
    if mode == "nn":
        return checkpoint_bytes(rank, step, size)
    offset, length = n1_range(ranks, rank, size)
    return range_bytes(rank, offset, length)


def total_bytes(mode: str, ranks: int, steps: int, size: int) -> int:
    """Bytes written by the whole job."""
    if mode == "nn":
        return sum(checkpoint_size(r, k, size) for r in range(ranks) for k in range(steps))
    return steps * sum(length for _, _, length in layout(ranks, 1, size))


def write_nn(directory: str, rank: int, step: int, data: bytes) -> None:
    path = os.path.join(directory, checkpoint_key(rank, step))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view[:MiB]):]
        os.fsync(fd)
    finally:
        os.close(fd)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("directory")
    parser.add_argument("--size", type=int, required=True, help="base bytes per rank and step")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--content-dir", type=Path, help="the ranks' bytes, written beforehand")
    args = parser.parse_args(argv)

    from mpi4py import MPI  # initialises MPI; only the job needs it

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()

    def load(step: int) -> bytes:
        if args.content_dir is not None:
            path: Path = args.content_dir / content_name(args.mode, rank, step)
            return path.read_bytes()
        return content(args.mode, ranks, rank, step, args.size)

    data = [load(step) for step in range(args.steps)]
    if rank == 0:
        os.makedirs(args.directory, exist_ok=True)
    comm.Barrier()
    start = MPI.Wtime()
    for step in range(args.steps):
        if args.mode == "nn":
            write_nn(args.directory, rank, step, data[step])
        else:
            offset, _ = n1_range(ranks, rank, args.size)
            path = os.path.join(args.directory, n1_file(step))
            fh = MPI.File.Open(comm, path, MPI.MODE_WRONLY | MPI.MODE_CREATE)
            try:
                view = memoryview(data[step])
                for at, n in pieces(len(view), n1_calls(args.size)):
                    fh.Write_at_all(offset + at, view[at:at + n])
                fh.Sync()
            finally:
                fh.Close()
        comm.Barrier()
    seconds = MPI.Wtime() - start
    if rank == 0:
        print(json.dumps({"mode": args.mode, "ranks": ranks, "steps": args.steps,
                          "bytes": total_bytes(args.mode, ranks, args.steps, args.size),
                          "seconds": seconds}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
