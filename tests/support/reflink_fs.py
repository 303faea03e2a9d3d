"""A small XFS file system with reflinks, loop-mounted in a temporary directory (needs
root, the loop driver and mkfs.xfs from Debian's xfsprogs; skipped without them)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

#: mkfs.xfs's smallest file system
_SIZE = 300 << 20


@contextmanager
def reflink_fs(base: Path) -> Iterator[Path]:
    """Yield the mount point of a fresh XFS made under ``base``; unmounted at the end."""
    if os.geteuid() != 0 or shutil.which("mkfs.xfs") is None or not Path(
            "/dev/loop-control").exists():
        pytest.skip("a loop-mounted XFS needs root, /dev/loop-control and mkfs.xfs")
    image, mountpoint = base / "xfs.img", base / "xfs"
    with image.open("wb") as f:
        f.truncate(_SIZE)
    mountpoint.mkdir()
    made = subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", str(image)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"mkfs.xfs failed: {made.stderr.strip()}")
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mountpoint)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot loop-mount an XFS here: {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False, capture_output=True)
