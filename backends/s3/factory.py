"""``s3:URL[?options]`` -> S3Backend (options and credentials: :mod:`backends.s3.config`)."""

from __future__ import annotations

from backends.registry import BackendOptions
from backends.s3.backend import S3Backend
from backends.s3.config import parse_config


def create(args: str, options: BackendOptions) -> S3Backend:
    """Parse and validate ``args`` (ValueError with the reason); no connection is made yet."""
    config = parse_config(args, min_part_size=options.min_part_size)
    return S3Backend(config, spool_dir=options.data_dir / "s3-spool")
