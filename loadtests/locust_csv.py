"""Read the ``PREFIX_stats.csv`` file that ``locust --csv PREFIX`` writes."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class LocustRow:
    """One line of the stats file: a (type, name) pair, or the ``Aggregated`` total."""

    type: str
    name: str
    requests: int
    failures: int
    median_ms: float
    average_ms: float
    min_ms: float
    max_ms: float
    average_size: float
    rps: float
    percentiles_ms: dict[str, float]  # "50%" -> ms; absent when Locust wrote "N/A"

    @property
    def throughput_mib_s(self) -> float:
        return self.rps * self.average_size / (1 << 20)


@dataclass(frozen=True, slots=True)
class LocustStats:
    rows: tuple[LocustRow, ...]
    total: LocustRow | None

    def row(self, name: str, type_: str | None = None) -> LocustRow:
        for row in self.rows:
            if row.name == name and (type_ is None or row.type == type_):
                return row
        raise KeyError(f"no row {type_ or '*'} {name!r} in {[r.name for r in self.rows]}")

    @property
    def names(self) -> set[str]:
        return {row.name for row in self.rows}

    @property
    def failures(self) -> int:
        return self.total.failures if self.total else sum(r.failures for r in self.rows)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:  # "N/A" for rows without requests
        return 0.0


def parse_stats(text: str) -> LocustStats:
    """Parse the text of a ``_stats.csv`` file."""
    rows: list[LocustRow] = []
    total: LocustRow | None = None
    for record in csv.DictReader(io.StringIO(text)):
        percentiles = {
            k: float(v) for k, v in record.items() if k and k.endswith("%") and v not in ("N/A", "")
        }
        row = LocustRow(
            type=record.get("Type", ""),
            name=record["Name"],
            requests=int(_number(record["Request Count"])),
            failures=int(_number(record["Failure Count"])),
            median_ms=_number(record["Median Response Time"]),
            average_ms=_number(record["Average Response Time"]),
            min_ms=_number(record["Min Response Time"]),
            max_ms=_number(record["Max Response Time"]),
            average_size=_number(record["Average Content Size"]),
            rps=_number(record["Requests/s"]),
            percentiles_ms=percentiles,
        )
        if row.name == "Aggregated" and not row.type:
            total = row
        else:
            rows.append(row)
    return LocustStats(tuple(rows), total)


def read_stats(prefix: str | Path) -> LocustStats:
    """Read ``{prefix}_stats.csv``."""
    return parse_stats(Path(f"{prefix}_stats.csv").read_text(encoding="utf-8"))
