"""Deterministic checkpoint contents of the MPI test jobs and benchmarks (no MPI needed).

* N-N: rank ``i`` writes ``rank-i/step-k.bin`` with :func:`checkpoint_bytes`; sizes differ
  per rank and step (:func:`checkpoint_size`) so mix-ups show.
* N-1: a shared file cut into records; in every record each rank owns one contiguous
  range of an odd size (:func:`layout`), filled with :func:`range_bytes`.
"""

from __future__ import annotations

import hashlib

DEFAULT_SIZE = 256 * 1024  # N-N base bytes per rank and step
DEFAULT_RANGE = 300_001  # N-1 base bytes per rank and record: odd, no page multiple


def _counter_mode(seed: bytes, size: int) -> bytes:
    """SHA-256 in counter mode over ``seed``, cut to ``size`` bytes."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()
        counter += 1
    return bytes(out[:size])


def checkpoint_key(rank: int, step: int) -> str:
    return f"rank-{rank}/step-{step}.bin"


def checkpoint_size(rank: int, step: int, base: int = DEFAULT_SIZE) -> int:
    """Sizes differ per rank and step (and are not block multiples) so mix-ups show."""
    return base + 4099 * rank + 37 * step


def checkpoint_bytes(rank: int, step: int, base: int = DEFAULT_SIZE) -> bytes:
    """Deterministic content of one N-N file: SHA-256 in counter mode over (rank, step)."""
    return _counter_mode(f"squall-checkpoint/{rank}/{step}".encode(),
                         checkpoint_size(rank, step, base))


def range_size(rank: int, record: int, base: int = DEFAULT_RANGE) -> int:
    return base + 4099 * rank + 37 * record


def layout(ranks: int, records: int, base: int = DEFAULT_RANGE) -> list[tuple[int, int, int]]:
    """(rank, offset, length) of every range of an N-1 file, in file order."""
    out: list[tuple[int, int, int]] = []
    offset = 0
    for record in range(records):
        for rank in range(ranks):
            length = range_size(rank, record, base)
            out.append((rank, offset, length))
            offset += length
    return out


def range_bytes(rank: int, offset: int, length: int) -> bytes:
    """Deterministic content of one N-1 range: SHA-256 in counter mode over (rank, offset)."""
    return _counter_mode(f"squall-n1/{rank}/{offset}".encode(), length)


def expected_bytes(ranks: int, records: int, base: int = DEFAULT_RANGE) -> bytes:
    """The whole N-1 file."""
    return b"".join(range_bytes(r, o, n) for r, o, n in layout(ranks, records, base))
