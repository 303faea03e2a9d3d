"""An N-1 MPI checkpoint through the mount: every rank writes its own ranges of ONE shared
file with MPI-IO (``MPI.File.Write_at_all``), as checkpointing codes do.

Run as ``mpirun -n N python mpi_n1_checkpoint.py PATH [--records K] [--size BYTES]
[--second-path PATH2]`` (the upper half of the ranks then opens PATH2: the same file
through another mount of the bucket, as ranks on another machine would). The
file is cut into ``K`` records; in every record each rank owns one contiguous range of an
odd size (:func:`layout`), so the ranks' ranges interleave through the file and no two
overlap. Each rank writes its ranges with one collective ``Write_at_all`` per record, then
``Sync`` and ``Close``; rank 0 prints ``n-1 checkpoint of N ranks x K records: SIZE bytes``.

:func:`layout` and :func:`expected_bytes` live in :mod:`loadtests.mpi.content` (no MPI
needed), where the tests that read the object back and the benchmarks find them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from loadtests.mpi.content import (  # noqa: F401 (the tests import them from here too)
    DEFAULT_RANGE,
    expected_bytes,
    layout,
    range_bytes,
)

DEFAULT_RECORDS = 3
DEFAULT_SIZE = DEFAULT_RANGE


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path")
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE, help="base range size")
    parser.add_argument("--second-path", help="the file for the upper half of the ranks")
    args = parser.parse_args(argv)

    from mpi4py import MPI  # initialises MPI; only the job needs it

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    mine = [(o, n) for r, o, n in layout(ranks, args.records, args.size) if r == rank]
    path = args.second_path if args.second_path and rank >= ranks // 2 else args.path
    fh = MPI.File.Open(comm, path, MPI.MODE_WRONLY | MPI.MODE_CREATE)
    try:
        for offset, length in mine:  # one collective write per record
            fh.Write_at_all(offset, range_bytes(rank, offset, length))
        fh.Sync()
    finally:
        fh.Close()
    comm.Barrier()
    if rank == 0:
        total = sum(n for _, _, n in layout(ranks, args.records, args.size))
        print(f"n-1 checkpoint of {ranks} ranks x {args.records} records: {total} bytes",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
