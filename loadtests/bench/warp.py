"""Run MinIO's ``warp`` with a workload's shape and read its summary.

warp's text output changed over the years; :func:`parse_warp` reads both the current form::

    Report: PUT. Concurrency: 4. Ran: 9s
     * Average: 1.40 MiB/s, 357.84 obj/s

and the older ones (``Operation: PUT`` ... ``* Average: 10.06 MiB/s, 1030.01 obj/s``, and the
mixed summary's ``* 632.28 MiB/s, 354.78 obj/s (59.993s, ...)``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from backends.core.units import format_size
from loadtests.bench.engine import Measurement
from loadtests.bench.workloads import MIXED_WEIGHTS, Workload

_SECTION = re.compile(r"^\s*(?:Report|Operation):\s*([A-Za-z]+)", re.MULTILINE)
_RATE = re.compile(
    r"^\s*\*\s*(?:Average:\s*)?(?:(?P<bytes>[\d.]+)\s*(?P<unit>[KMGT]?i?B)/s,\s*)?"
    r"(?P<objs>[\d.]+)\s*obj/s",
    re.MULTILINE,
)
_ERRORS = re.compile(r"\bErr(?:or)?s:\s*(\d+)")
_UNIT = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
_UNIT.update({"KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4})


class WarpFailed(RuntimeError):
    """warp exited with an error or printed nothing this module can read."""


@dataclass(frozen=True, slots=True)
class WarpOp:
    """warp's average for one operation (or ``TOTAL``)."""

    mib_s: float
    obj_s: float
    errors: int = 0


def parse_warp(text: str) -> dict[str, WarpOp]:
    """Average throughput per operation (upper case: PUT, GET, STAT, DELETE, TOTAL)."""
    result: dict[str, WarpOp] = {}
    starts = list(_SECTION.finditer(text))
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        body = text[match.end() : end]
        rate = _RATE.search(body)
        if rate is None:
            continue
        mib = 0.0
        if rate.group("bytes"):
            mib = float(rate.group("bytes")) * _UNIT.get(rate.group("unit"), 1) / (1 << 20)
        errors = sum(int(n) for n in _ERRORS.findall(body))
        result[match.group(1).upper()] = WarpOp(mib, float(rate.group("objs")), errors)
    return result


def measurement_from_warp(workload: Workload, ops: dict[str, WarpOp]) -> Measurement:
    """The workload's figure from warp's per-operation averages."""
    if workload.kind == "mixed":
        if "TOTAL" in ops:
            picked = [ops["TOTAL"]]
        else:
            picked = [ops[k] for k in ("GET", "STAT", "PUT", "DELETE") if k in ops]
    else:
        picked = [ops[workload.kind.upper()]] if workload.kind.upper() in ops else []
    if not picked:
        raise WarpFailed(f"no {workload.kind.upper()} summary in warp's output")
    return Measurement(
        rates=(sum(p.mib_s for p in picked), sum(p.obj_s for p in picked)),
        errors=sum(p.errors for p in ops.values()),
    )


def warp_command(
    workload: Workload,
    *,
    endpoint: str,
    access_key: str,
    secret_key: str,
    region: str,
    bucket: str,
    warp: str = "warp",
    extra: Sequence[str] = (),
) -> list[str]:
    """The warp command line with the workload's shape (warp bounds runs by time only)."""
    argv = [
        warp,
        workload.kind,
        "--host", urlsplit(endpoint).netloc,
        "--access-key", access_key,
        "--secret-key", secret_key,
        "--region", region,
        "--bucket", bucket,
        "--obj.size", format_size(workload.size),
        "--concurrent", str(workload.clients),
        "--duration", f"{max(1, round(workload.duration))}s",
        "--lookup", "path",
        "--disable-sha256-payload",
    ]  # fmt: skip
    if workload.kind in ("get", "mixed"):
        argv += ["--objects", str(max(1, workload.objects))]
    if workload.kind == "mixed":
        for op, weight in MIXED_WEIGHTS.items():
            argv += [f"--{op}-distrib", f"{weight:g}"]
    return argv + list(extra)


def find_warp() -> str | None:
    return shutil.which("warp")


def run_warp(argv: Sequence[str], workload: Workload, timeout: float) -> Measurement:
    """Run warp and turn its summary into a measurement."""
    try:
        proc = subprocess.run(  # argv built by warp_command
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise WarpFailed(f"warp did not finish within {timeout:.0f}s") from exc
    output = proc.stdout + "\n" + proc.stderr
    if proc.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-10:])
        raise WarpFailed(f"warp exited with {proc.returncode}:\n{tail}")
    return measurement_from_warp(workload, parse_warp(output))
