"""The application's I/O model as IOR takes it: ``np`` processes, ``-s`` segments, ``-b``
block size, ``-t`` transfer size; ``-F`` (file per process, N-N) or one shared file (N-1).

A checkpoint of rank ``r`` is ``segments x block`` bytes: segment ``i`` is one block,
written in ``block / transfer`` calls of ``transfer`` bytes. N-N: the block lands at
``i * block`` of the rank's own file. N-1: IOR's segmented layout, the block lands at
``(i * np + r) * block`` of the shared file, so the ranks' blocks interleave segment by
segment.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.core.units import parse_size

MODES = ("nn", "n1")


@dataclass(frozen=True, slots=True)
class IorModel:
    """One checkpoint's I/O: who writes how much, in which calls, where."""

    np: int
    segments: int
    block: int
    transfer: int
    mode: str = "nn"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if min(self.np, self.segments, self.block, self.transfer) < 1:
            raise ValueError("np, segments, block and transfer must be >= 1")
        if self.block % self.transfer:
            raise ValueError("the block size must be a multiple of the transfer size")

    @classmethod
    def parse(cls, np: int, segments: int, block: str, transfer: str,
              mode: str = "nn") -> IorModel:
        """From IOR-style sizes (``4m``, ``1MiB``...)."""
        return cls(np, segments, _size(block), _size(transfer), mode)

    @property
    def rank_bytes(self) -> int:
        """What one rank writes per checkpoint."""
        return self.segments * self.block

    @property
    def total_bytes(self) -> int:
        """What all ranks write per checkpoint (S_c)."""
        return self.np * self.rank_bytes

    def block_offset(self, rank: int, segment: int) -> int:
        """Where ``rank``'s block of ``segment`` lands in its file."""
        if self.mode == "nn":
            return segment * self.block
        return (segment * self.np + rank) * self.block

    def transfers(self, rank: int) -> list[tuple[int, int, int]]:
        """(file offset, offset in the rank's state, length) of every write call."""
        return [(self.block_offset(rank, seg) + t, seg * self.block + t, self.transfer)
                for seg in range(self.segments) for t in range(0, self.block, self.transfer)]

    def path(self, step: int, rank: int) -> str:
        """The file of ``rank`` at checkpoint ``step``, relative to the job's directory."""
        if self.mode == "nn":
            return f"ckpt-{step}/rank-{rank}.bin"
        return f"ckpt-{step}.bin"

    def ior_args(self) -> str:
        """The same I/O as an IOR command line."""
        flags = " -F" if self.mode == "nn" else ""
        return (f"mpirun -n {self.np} ior -w -r -s {self.segments} -b {_ior(self.block)} "
                f"-t {_ior(self.transfer)}{flags} -e")


def _size(text: str) -> int:
    """IOR's suffixes (k, m, g: powers of 1024) or Squall's (``4MiB``)."""
    t = text.strip()
    if t and t[-1].lower() in "kmg" and t[:-1].isdigit():
        return int(t[:-1]) << {"k": 10, "m": 20, "g": 30}[t[-1].lower()]
    return parse_size(t)


def _ior(n: int) -> str:
    for unit, shift in (("g", 30), ("m", 20), ("k", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)
