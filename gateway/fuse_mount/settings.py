"""Settings of one mount, built once from the command line and the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from gateway.client.credentials import Credentials
from gateway.client.sigv4 import DEFAULT_REGION

MiB = 1024 * 1024
MIN_BLOCK_SIZE = 5 * MiB  # S3's minimum size of every multipart part but the last


class SettingsError(ValueError):
    """A setting is missing or invalid (the CLI prints it and exits with code 2)."""


@dataclass(frozen=True, slots=True)
class MountSettings:
    endpoint: str
    bucket: str
    mountpoint: Path
    credentials: Credentials
    block_size: int = 8 * MiB
    readahead: int = 16 * MiB
    attr_timeout: float = 1.0
    region: str = DEFAULT_REGION
    max_inflight: int = 4
    staging_dir: Path | None = None
    threads: int = 8
    max_attempts: int = 5
    writeback_cache: bool = True
    #: send object requests to their key's owner in a cluster: True (the ring must be
    #: readable), False (never), None (automatic: when the ring is read and every member
    #: reached, see :func:`gateway.fuse_mount.routing.owner_router`)
    route_to_owners: bool | None = None
    #: globs of keys written by several mounts at once (one upload, docs: N-1 checkpoints)
    shared_files: tuple[str, ...] = ()
    #: seconds a shared file's writer stays counted without renewing (a mount that died)
    shared_lease: float = 60.0
    #: globs of keys read and written past the kernel's page cache (FOPEN_DIRECT_IO)
    direct_files: tuple[str, ...] = ()
    #: PEM CA certificates that verify an https:// endpoint (None: the system's)
    ca_bundle: Path | None = None

    def __post_init__(self) -> None:
        if self.block_size < MIN_BLOCK_SIZE:
            raise SettingsError(f"--block-size must be at least {MIN_BLOCK_SIZE} bytes (5MiB)")
        if self.readahead < 0:
            raise SettingsError("--readahead must not be negative")
        if self.max_attempts < 1 or self.max_inflight < 1:
            raise SettingsError("--max-attempts and --max-inflight must be at least 1")
        if self.shared_lease < 3:
            raise SettingsError("--shared-lease must be at least 3 seconds")
        if self.attr_timeout < 0:
            raise SettingsError("--attr-timeout must not be negative")
        if not self.endpoint.startswith(("http://", "https://")):
            raise SettingsError(f"endpoint must be an http:// or https:// URL: {self.endpoint}")
        if self.ca_bundle is not None and not self.ca_bundle.is_file():
            raise SettingsError(f"--ca-bundle {self.ca_bundle}: no such file")

    @property
    def readahead_blocks(self) -> int:
        return -(-self.readahead // self.block_size)


def named_by(key: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``key`` matches one of the globs ``patterns`` (``*`` spans ``/`` too)."""
    return any(fnmatchcase(key, p) for p in patterns)


def check_mountpoint(path: Path) -> None:
    """The mountpoint must be an existing, empty directory that is not mounted yet."""
    if not path.exists():
        raise SettingsError(f"mountpoint {path} does not exist")
    if not path.is_dir():
        raise SettingsError(f"mountpoint {path} is not a directory")
    if os.path.ismount(path):
        raise SettingsError(f"mountpoint {path} is already a mount point")
    try:
        if any(path.iterdir()):
            raise SettingsError(f"mountpoint {path} is not empty")
    except PermissionError as exc:
        raise SettingsError(f"mountpoint {path} is not readable: {exc.strerror}") from exc
