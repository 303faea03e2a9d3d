"""``blobseer_like:DIR1,DIR2,...[?options]`` -> BlobseerBackend (options: config.py)."""

from __future__ import annotations

from backends.blobseer_like.backend import BlobseerBackend
from backends.blobseer_like.config import parse_config
from backends.registry import BackendOptions


def create(args: str, options: BackendOptions) -> BlobseerBackend:
    """Parse ``args``, open and lock the providers and the index now, so that a bad
    directory stops the gateway at start; ValueError with the reason."""
    backend = BlobseerBackend(parse_config(args), index_root=options.data_dir / "blobseer",
                              durability=options.durability,
                              min_part_size=options.min_part_size)
    backend.open()
    return backend
