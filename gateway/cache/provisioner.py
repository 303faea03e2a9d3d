"""Provisioners: where elastic cache volumes come from (seed: adaptive caching, III-A.1/E).

A :class:`Provisioner` attaches a volume of a given size and reserved bandwidth, detaches
it, and lists the volumes it holds (also after a crash, so their data is found again).
:class:`LocalProvisioner` makes directories ``<root>/vol-<n>``; the cache tier enforces
the size through its own space accounting and the bandwidth with a token bucket on the
volume's writes (emulating a faster virtual disk). Cloud and Kubernetes provisioners are
described in docs/cache.md ("Elastic capacity").

Layout of a local volume (format ``squall-local-volume``, version 1)::

    <root>/vol-<n>/squall-volume.json   {"format", "version", "id", "size_bytes",
                                         "bandwidth_bytes_per_s", "attached_at"}
    <root>/vol-<n>/...                  the cache volume itself (docs/cache.md)
    <root>/.vol-<n>.attaching|detaching  an attach or detach interrupted by a crash
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from backends.core.blocking import run_cache_blocking
from gateway.cache.volumes import fsync_dir

MARKER = "squall-volume.json"
FORMAT = "squall-local-volume"
VERSION = 1
_NAME = re.compile(r"^vol-(\d+)$")
_LEFTOVER = re.compile(r"^\.vol-\d+\.(attaching|detaching)$")


class ProvisionError(Exception):
    """A volume could not be attached, detached or listed."""


@dataclass(frozen=True, slots=True)
class VolumeHandle:
    """An attached volume: where it is mounted, its size M and reserved bandwidth B_c."""

    id: str
    path: Path
    size_bytes: int
    bandwidth_bytes_per_s: float | None  # None: not capped
    attached_at: float  # wall clock (epoch seconds)
    provider: str = "local"


@runtime_checkable
class Provisioner(Protocol):
    """Attaches and detaches cache volumes (a local directory, an EBS volume, a PVC...)."""

    async def attach(self, size_bytes: int,
                     bandwidth_bytes_per_s: float | None) -> VolumeHandle:
        """A new, empty volume mounted at ``handle.path``; ProvisionError if impossible."""
        ...

    async def detach(self, handle: VolumeHandle) -> None:
        """Release the volume and everything on it (the caller made sure nothing there
        is needed any more)."""
        ...

    async def list(self) -> list[VolumeHandle]:
        """The volumes attached now (after a restart: those a crash left attached)."""
        ...


class LocalProvisioner:
    """Volumes as directories under ``root`` (on the fast local disk)."""

    def __init__(self, root: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.root = root
        self._clock = clock

    async def attach(self, size_bytes: int,
                     bandwidth_bytes_per_s: float | None) -> VolumeHandle:
        if size_bytes <= 0:
            raise ProvisionError(f"a volume needs a size > 0, not {size_bytes}")
        if bandwidth_bytes_per_s is not None and bandwidth_bytes_per_s <= 0:
            raise ProvisionError("a volume's bandwidth must be > 0 (or unlimited)")
        return await run_cache_blocking(self._attach, size_bytes, bandwidth_bytes_per_s)

    def _attach(self, size_bytes: int, bandwidth: float | None) -> VolumeHandle:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            free = shutil.disk_usage(self.root).free
            if free < size_bytes:
                raise ProvisionError(f"{self.root} has {free} bytes free, a volume of "
                                     f"{size_bytes} bytes was asked for")
            n = 1 + max((int(m.group(1)) for p in self.root.iterdir()
                         if (m := _NAME.match(p.name))), default=0)
            name = f"vol-{n}"
            handle = VolumeHandle(id=name, path=self.root / name, size_bytes=size_bytes,
                                  bandwidth_bytes_per_s=bandwidth,
                                  attached_at=self._clock())
            staging = self.root / f".{name}.attaching"
            staging.mkdir()
            marker = staging / MARKER
            with open(marker, "w") as f:
                json.dump({"format": FORMAT, "version": VERSION, "id": name,
                           "size_bytes": size_bytes, "bandwidth_bytes_per_s": bandwidth,
                           "attached_at": handle.attached_at}, f)
                f.flush()
                os.fsync(f.fileno())
            fsync_dir(staging)
            os.replace(staging, handle.path)
            fsync_dir(self.root)
            return handle
        except OSError as exc:
            raise ProvisionError(f"cannot create a volume under {self.root}: {exc}") from exc

    async def detach(self, handle: VolumeHandle) -> None:
        await run_cache_blocking(self._detach, handle)

    def _detach(self, handle: VolumeHandle) -> None:
        doomed = self.root / f".{handle.id}.detaching"
        try:
            if handle.path.exists():
                os.replace(handle.path, doomed)
                fsync_dir(self.root)
            shutil.rmtree(doomed, ignore_errors=True)
        except OSError as exc:
            raise ProvisionError(f"cannot remove volume {handle.path}: {exc}") from exc

    async def list(self) -> list[VolumeHandle]:
        return await run_cache_blocking(self._list)

    def _list(self) -> builtins.list[VolumeHandle]:
        if not self.root.exists():
            return []
        found: list[VolumeHandle] = []
        try:
            for path in sorted(self.root.iterdir()):
                if _LEFTOVER.match(path.name):  # an attach or detach cut short
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                if _NAME.match(path.name) and path.is_dir():
                    found.append(self._read(path))
        except OSError as exc:
            raise ProvisionError(f"cannot list volumes under {self.root}: {exc}") from exc
        return sorted(found, key=lambda h: int(h.id.split("-")[1]))

    def _read(self, path: Path) -> VolumeHandle:
        try:
            data = json.loads((path / MARKER).read_text())
        except (OSError, ValueError) as exc:
            raise ProvisionError(f"volume {path} has no readable {MARKER}: {exc}") from exc
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ProvisionError(f"volume {path} has an unsupported format {data!r}")
        with contextlib.suppress(KeyError, TypeError, ValueError):
            bandwidth = data["bandwidth_bytes_per_s"]
            return VolumeHandle(id=str(data["id"]), path=path,
                                size_bytes=int(data["size_bytes"]),
                                bandwidth_bytes_per_s=None if bandwidth is None
                                else float(bandwidth),
                                attached_at=float(data["attached_at"]))
        raise ProvisionError(f"volume {path} has a malformed {MARKER}")
