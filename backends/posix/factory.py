"""``posix:DIR`` -> PosixBackend."""

from __future__ import annotations

from pathlib import Path

from backends.posix import PosixBackend
from backends.registry import BackendOptions


def create(args: str, options: BackendOptions) -> PosixBackend:
    root = Path(args).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return PosixBackend(root, durability=options.durability,
                        min_part_size=options.min_part_size, direct_io=options.direct_io)
