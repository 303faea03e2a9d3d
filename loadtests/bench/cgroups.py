"""A CPU-capped cgroup per server process: a "host" of its own on one machine.

cgroup v2 (``cpu.max``, usage from ``cpu.stat``) where its ``cpu`` controller is
available, else the v1 ``cpu`` controller (``cpu.cfs_quota_us``) with ``cpuacct`` for the
usage. Root only; :func:`cgroups_unavailable` says why not otherwise. The groups are made
at the root of the hierarchy as ``squall-bench-<id>`` and removed when closed (their
processes stopped first).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


def _v2_root() -> Path | None:
    """The cgroup v2 hierarchy whose ``cpu`` controller can be enabled (None: none)."""
    for root in (ROOT, ROOT / "unified"):
        controllers = root / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split():
            return root
    return None


def cgroups_unavailable() -> str | None:
    """Why CPU-capped cgroups cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "CPU-capped hosts need root (cgroups); run as root or without --hosts"
    if _v2_root() is None and not (ROOT / "cpu" / "cpu.cfs_quota_us").exists():
        return "no cgroup cpu controller (v2 or v1) is mounted under /sys/fs/cgroup"
    return None


class CpuGroup:
    """One cgroup capped at ``cap`` CPUs; processes are moved in with :meth:`add` (their
    children follow), CPU time read with :meth:`seconds`."""

    def __init__(self, cap: float, name: str | None = None) -> None:
        name = name or f"squall-bench-{secrets.token_hex(4)}"
        quota = max(1000, int(cap * PERIOD_US))
        self._v2 = _v2_root()
        if self._v2 is not None:
            subtree = self._v2 / "cgroup.subtree_control"
            if "cpu" not in subtree.read_text().split():
                subtree.write_text("+cpu")
            self._dirs = [self._v2 / name]
            self._dirs[0].mkdir()
            (self._dirs[0] / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        else:
            self._dirs = [ROOT / "cpu" / name, ROOT / "cpuacct" / name]
            for path in self._dirs:
                if path.parent.exists():
                    path.mkdir()
            (self._dirs[0] / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self._dirs[0] / "cpu.cfs_quota_us").write_text(str(quota))
            self._dirs = [d for d in self._dirs if d.exists()]

    def add(self, pid: int) -> None:
        for path in self._dirs:
            (path / "cgroup.procs").write_text(str(pid))

    def seconds(self) -> float:
        """CPU seconds the group's processes have used (user + system)."""
        if self._v2 is not None:
            for line in (self._dirs[0] / "cpu.stat").read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "usage_usec":
                    return int(value) / 1e6
            return 0.0
        usage = ROOT / "cpuacct" / self._dirs[0].name / "cpuacct.usage"
        return int(usage.read_text()) / 1e9 if usage.exists() else 0.0

    def close(self) -> None:
        """Remove the group (its processes must have ended)."""
        for path in self._dirs:
            with contextlib.suppress(OSError):
                path.rmdir()
