"""An MPI job that checkpoints through the mount: every rank writes its own file per step.

Run as ``mpirun -n N python mpi_checkpoint.py DIRECTORY [--steps K] [--size BYTES]``. Rank
``i`` writes ``DIRECTORY/rank-i/step-k.bin`` for ``k`` in ``0..K-1`` with the bytes of
:func:`checkpoint_bytes`, fsyncs and closes it; all ranks meet at a barrier after every step,
as a bulk-synchronous code does. Rank 0 prints ``checkpointed N ranks x K steps`` at the end.

The contents come from :mod:`loadtests.mpi.content` (no MPI needed), where the test that
reads the objects back and the benchmarks find them too.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from loadtests.mpi.content import (  # noqa: F401 (the tests import them from here too)
    DEFAULT_SIZE,
    checkpoint_bytes,
    checkpoint_key,
    checkpoint_size,
)

DEFAULT_STEPS = 3


def write_checkpoint(directory: str, rank: int, step: int, base: int) -> None:
    path = os.path.join(directory, checkpoint_key(rank, step))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = checkpoint_bytes(rank, step, base)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:  # write(2) in 64 KiB calls, as real codes do
            view = view[os.write(fd, view[:64 * 1024]):]
        os.fsync(fd)
    finally:
        os.close(fd)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("directory")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE, help="base size in bytes")
    args = parser.parse_args(argv)

    from mpi4py import MPI  # initialises MPI; only the job needs it

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    for step in range(args.steps):
        write_checkpoint(args.directory, rank, step, args.size)
        comm.Barrier()
    if rank == 0:
        print(f"checkpointed {ranks} ranks x {args.steps} steps", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
