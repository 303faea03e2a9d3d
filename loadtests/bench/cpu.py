"""CPU time of a server process and its live children, from /proc (Linux).

CPU seconds per request stay stable on a noisy machine where throughput does not: a
figure that depends on the server's own work, not on what else runs beside it.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may contain spaces
    return text[text.rindex(")") + 2:].split()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants (0 if gone)."""
    total = 0.0
    stack = [pid]
    while stack:
        current = stack.pop()
        fields = _stat_fields(current)
        if fields is None:
            continue
        total += (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
        stack.extend(_children(current))
    return total


def machine_cpu_seconds() -> float:
    """CPU seconds every core of this machine has been busy so far (all processes, the
    kernel's threads and interrupts; idle and I/O wait excluded), from ``/proc/stat``."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICKS
