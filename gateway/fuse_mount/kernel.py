"""Kernel-side tuning of a mounted FUSE file system (best effort, needs root).

The kernel reads ahead of a sequential reader in windows of ``read_ahead_kb`` of the
mount's backing device, 128 KiB by default for FUSE: every read request the mount gets is
then at most 128 KiB. A 1 MiB window lets the kernel ask for 1 MiB at a time (the largest
FUSE request), eight times fewer requests through Python for the same bytes.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

MOUNTINFO = Path("/proc/self/mountinfo")
BDI = Path("/sys/class/bdi")


def device_of(mountpoint: Path, mountinfo: Path = MOUNTINFO) -> str | None:
    """``major:minor`` of the file system mounted on ``mountpoint`` (the last such mount)."""
    target = os.path.abspath(mountpoint)
    found = None
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # id parent major:minor root mountpoint ... (mount points escape spaces as \040)
        if len(fields) > 4 and fields[4].replace("\\040", " ") == target:
            found = fields[2]
    return found


def set_read_ahead(mountpoint: Path, kib: int, *, bdi: Path = BDI) -> bool:
    """Set the kernel read-ahead window of the mount; False when not possible here."""
    device = device_of(mountpoint)
    if device is None:
        return False
    try:
        (bdi / device / "read_ahead_kb").write_text(f"{kib}\n")
    except OSError as exc:
        log.debug("kernel read-ahead of %s left as it is: %s", mountpoint, exc)
        return False
    log.debug("kernel read-ahead of %s set to %d KiB", mountpoint, kib)
    return True
