"""Run one of the Locust scenarios headless as a benchmark row (``--locust SCENARIO``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from loadtests.bench.engine import Measurement
from loadtests.locust_csv import LocustStats, read_stats

SCENARIO_DIR = Path(__file__).resolve().parent.parent


class LocustFailed(RuntimeError):
    """Locust could not run the scenario (bad arguments, crash); failures are not this."""


@dataclass(frozen=True, slots=True)
class LocustWorkload:
    """A scenario run for ``seconds`` with ``users`` users; its figure is requests/s."""

    scenario: str
    users: int
    seconds: float
    unit: str = "req/s"

    @property
    def key(self) -> str:
        return f"locust-{self.scenario}-u{self.users}"

    @property
    def title(self) -> str:
        return f"locust {self.scenario} x{self.users}"

    @property
    def locustfile(self) -> Path:
        path = SCENARIO_DIR / f"{self.scenario}.py"
        if not path.is_file():
            raise LocustFailed(f"no scenario {self.scenario!r} ({path} does not exist)")
        return path


def locust_command(
    workload: LocustWorkload,
    *,
    endpoint: str,
    csv_prefix: Path,
    extra: Sequence[str] = (),
) -> list[str]:
    return [
        sys.executable, "-m", "locust",
        "-f", str(workload.locustfile),
        "--headless", "--only-summary",
        "--host", endpoint,
        "-u", str(workload.users), "-r", str(workload.users),
        "-t", f"{max(1, round(workload.seconds))}s",
        "--stop-timeout", "10",
        "--csv", str(csv_prefix),
        *extra,
    ]  # fmt: skip


def measurement_from_stats(stats: LocustStats) -> Measurement:
    """Requests/s and MiB/s of the whole run; failures count as errors."""
    total = stats.total
    if total is None:
        raise LocustFailed("the stats file has no Aggregated row")
    return Measurement(
        ops=total.requests,
        errors=total.failures,
        rates=(total.throughput_mib_s, total.rps),
    )


def run_locust(
    argv: Sequence[str], csv_prefix: Path, env: Mapping[str, str], timeout: float
) -> Measurement:
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, env=dict(env), timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise LocustFailed(f"locust did not stop within {timeout:.0f}s") from exc
    # exit code 1 means "there were failures": they are in the figures, not an error here
    if proc.returncode not in (0, 1):
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        raise LocustFailed(f"locust exited with {proc.returncode}:\n{tail}")
    return measurement_from_stats(read_stats(csv_prefix))
