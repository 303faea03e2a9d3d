"""The tables of figures: workloads down, targets across; each figure beside its ratio to
the direct-posix baseline, the first target's ratio to every other one, and the servers'
CPU time per operation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from loadtests.bench.engine import Measurement

# A cell's source: a measurement, or the reason there is none ("server failed to start").
Result = Measurement | str


class RowSpec(Protocol):
    """What a row needs from a workload (a :class:`Workload` or a Locust scenario run)."""

    @property
    def key(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def unit(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Column:
    """One target across the table: a gateway configuration (or an external endpoint)."""

    name: str
    fsync: bool | None  # is each PUT fsynced before it is acknowledged? None: unknown
    results: Mapping[str, Result]  # workload key -> result


@dataclass(frozen=True, slots=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def format_value(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def format_cell(result: Result | None, unit: str) -> str:
    if result is None:
        return "-"
    if isinstance(result, str):
        return "failed"
    if result.ops == 0 and result.rates is None:
        return f"failed ({result.errors} err)" if result.errors else "no ops"
    text = format_value(result.value(unit))
    return f"{text} ({result.errors} err)" if result.errors else text


def ratio(result: Result | None, base: Result | None, unit: str) -> str:
    """``result / base`` as "0.85x", or "" when either side has no figure."""
    if not isinstance(result, Measurement) or not isinstance(base, Measurement):
        return ""
    top, bottom = result.value(unit), base.value(unit)
    if top <= 0 or bottom <= 0:
        return ""
    return f"{top / bottom:.2f}x"


def yes_no(flag: bool | None) -> str:
    return {True: "yes", False: "no", None: "?"}[flag]


def build_table(
    workloads: Sequence[RowSpec],
    baseline: Mapping[str, Result],
    columns: Sequence[Column],
    *,
    baseline_name: str = "posix direct",
) -> Table:
    """Rows: one per workload, then whether PUTs were fsynced. Columns: the workload, its
    unit, the baseline, then per target its figure and ``target / baseline`` (without a
    baseline: the figures alone)."""
    direct = bool(baseline)
    headers = ["workload", "unit"] + ([baseline_name] if direct else [])
    for col in columns:
        headers += [col.name] + ([f"{col.name} / direct"] if direct else [])
    rows: list[tuple[str, ...]] = []
    for wl in workloads:
        base = baseline.get(wl.key)
        row = [wl.title, wl.unit] + ([format_cell(base, wl.unit)] if direct else [])
        for col in columns:
            result = col.results.get(wl.key)
            row += [format_cell(result, wl.unit)]
            row += [ratio(result, base, wl.unit)] if direct else []
        rows.append(tuple(row))
    fsync_row = ["PUT fsynced before ack", ""] + (["yes"] if direct else [])
    for col in columns:
        fsync_row += [yes_no(col.fsync)] + ([""] if direct else [])
    rows.append(tuple(fsync_row))
    return Table(tuple(headers), tuple(rows))


def build_ratio_table(workloads: Sequence[RowSpec], columns: Sequence[Column]) -> Table:
    """The first column against each other one (``first / other``), measured in the
    same run: the figures the targets are stated in."""
    if len(columns) < 2:
        return Table((), ())
    first = columns[0]
    headers = ["workload", *(f"{first.name} / {col.name}" for col in columns[1:])]
    rows = []
    for wl in workloads:
        mine = first.results.get(wl.key)
        rows.append((wl.title, *(ratio(mine, col.results.get(wl.key), wl.unit)
                                 for col in columns[1:])))
    return Table(tuple(headers), tuple(rows))


def build_cpu_table(workloads: Sequence[RowSpec], columns: Sequence[Column], *,
                    client: bool = False) -> Table:
    """Server CPU microseconds (user + system) per operation, per target; with ``client``,
    the load generator's own, which bounds a workload it cannot drive faster."""

    def per_op(result: Result | None) -> float | None:
        if not isinstance(result, Measurement):
            return None
        return result.client_cpu_us_per_op if client else result.cpu_us_per_op

    measured = [c for c in columns if any(per_op(r) is not None for r in c.results.values())]
    if not measured:
        return Table((), ())
    headers = ["client CPU us/op" if client else "server CPU us/op", *(c.name for c in measured)]
    rows = []
    for wl in workloads:
        cells = [format_value(v) if (v := per_op(col.results.get(wl.key))) is not None else "-"
                 for col in measured]
        rows.append((wl.title, *cells))
    return Table(tuple(headers), tuple(rows))


def render_text(table: Table) -> str:
    """Aligned plain text: text left, figures right."""
    widths = [
        max(len(table.headers[i]), *(len(r[i]) for r in table.rows))
        for i in range(len(table.headers))
    ]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=False))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(table.headers), rule, *(line(r) for r in table.rows)])


def render_markdown(table: Table) -> str:
    """A GitHub-flavoured Markdown table (figures right-aligned)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    align = ["---"] + ["---:"] * (len(table.headers) - 1)
    return "\n".join([line(table.headers), "|" + "|".join(align) + "|", *map(line, table.rows)])
