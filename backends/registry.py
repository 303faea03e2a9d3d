"""Backends by name (``posix:DIR`` ...), imported lazily so unused ones cost nothing."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from backends.core.base import Backend


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """What every backend factory may use besides its own ``ARGS`` string."""

    data_dir: Path
    durability: Literal["fsync", "none"] = "fsync"
    min_part_size: int = 5 * 1024 * 1024
    direct_io: bool = True


# kind -> "module:factory"; a factory takes (args: str, options: BackendOptions).
FACTORIES = {
    "posix": "backends.posix.factory:create",
    "s3": "backends.s3.factory:create",
    "blobseer_like": "backends.blobseer_like.factory:create",
}


def create_backend(kind: str, args: str, options: BackendOptions) -> Backend:
    """Build the backend ``kind`` from its argument string; ValueError if unknown."""
    target = FACTORIES.get(kind)
    if target is None:
        raise ValueError(f"unknown backend kind {kind!r}; known: {', '.join(sorted(FACTORIES))}")
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    backend: Backend = factory(args, options)
    return backend
