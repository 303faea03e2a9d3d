"""The cache volumes' devices: free space as the file system reports it.

The configured capacity is a quota; the device may hold less (a disk shared with the
backend or with other programs). At start a volume whose quota exceeds what its device
can give (its free space plus what the cache already holds there) is clamped, with a
warning; at run time a write that meets a full device (ENOSPC) clamps the volume to what
it holds, so the space accounting makes room (evicting clean data) or sends writes to the
backend instead of failing them.
"""

from __future__ import annotations

import errno
import logging
import os

from gateway.cache.volumes import Volume

log = logging.getLogger(__name__)


def device_free(vol: Volume) -> int:
    """Bytes an unprivileged writer may still use on the volume's file system."""
    st = os.statvfs(vol.path)
    return st.f_bavail * st.f_frsize


def clamp_to_device(vol: Volume) -> bool:
    """Lower ``vol.capacity`` to what its device can hold; True if it was lowered."""
    possible = vol.used + device_free(vol)
    if vol.capacity <= possible:
        return False
    log.warning("cache volume %s: capacity %s exceeds what its device can hold (%s free "
                "plus %s cached); using %s", vol.path, _mib(vol.capacity),
                _mib(possible - vol.used), _mib(vol.used), _mib(possible))
    vol.capacity = possible
    return True


def out_of_space(exc: BaseException) -> bool:
    """Whether ``exc`` was caused by a full device (ENOSPC, or a quota: EDQUOT)."""
    cause = exc.__cause__
    return isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT)


def device_full(vol: Volume) -> None:
    """A write met ENOSPC: the volume holds no more than it does now."""
    if vol.capacity > vol.used:
        log.warning("cache volume %s: its device is full; capacity lowered from %s to %s",
                    vol.path, _mib(vol.capacity), _mib(vol.used))
        vol.capacity = vol.used


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
