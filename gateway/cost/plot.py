"""PNG plots of the cost meter's series and of cache-size advice (matplotlib, optional).

matplotlib is an optional dependency (``pip install 'squall[plot]'``); without it the
functions raise :class:`PlotUnavailable` with that instruction, and nothing else in
:mod:`gateway.cost` needs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gateway.cost import model


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise PlotUnavailable("plotting needs matplotlib: pip install 'squall[plot]'") from exc
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def plot_series(series: Mapping[str, Sequence[float]], path: Path) -> None:
    """Three stacked panels over time: I/O activity, cache size, accumulated cost."""
    plt = _pyplot()
    t = list(series.get("elapsed_s", []))
    fig, (io, size, cost) = plt.subplots(3, 1, sharex=True, figsize=(9, 8))
    try:
        io.plot(t, [model.mb_per_s(v) for v in series.get("ingest_rate_bytes_per_s", [])],
                label="ingest (client writes)")
        if "flush_rate_bytes_per_s" in series:
            io.plot(t, [model.mb_per_s(v) for v in series["flush_rate_bytes_per_s"]],
                    label="flush (cache to backend)")
            io.legend(loc="upper right")
        io.set_ylabel("MB/s")
        io.set_title("I/O activity")
        size.plot(t, [model.gb(v) for v in series.get("cache_size_bytes", [])],
                  label="cache size M(t)")
        size.plot(t, [model.gb(v) for v in series.get("cache_used_bytes", [])], label="used")
        size.plot(t, [model.gb(v) for v in series.get("dirty_bytes", [])], label="dirty")
        size.set_ylabel("GB")
        size.legend(loc="upper right")
        cost.plot(t, list(series.get("cost_agbs", [])))
        cost.set_ylabel("C(t), AGBs")
        cost.set_xlabel("time (s)")
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)


def plot_candidates(rows: Sequence[tuple[str, float, float, float]], path: Path,
                    deadline_s: float | None = None) -> None:
    """Predicted T and C_a against cache size; ``rows`` are (config, M GB, T s, C_a)."""
    plt = _pyplot()
    fig, (time_ax, cost_ax) = plt.subplots(1, 2, figsize=(11, 4))
    try:
        for name in dict.fromkeys(r[0] for r in rows):
            mine = sorted((r for r in rows if r[0] == name), key=lambda r: r[1])
            sizes = [r[1] for r in mine]
            time_ax.plot(sizes, [r[2] for r in mine], marker="o", label=name)
            cost_ax.plot(sizes, [r[3] for r in mine], marker="o", label=name)
        if deadline_s is not None:
            time_ax.axhline(deadline_s, linestyle="--", color="grey", label="T_max")
        time_ax.set_xlabel("cache size M(S_c), GB")
        time_ax.set_ylabel("predicted T (s)")
        cost_ax.set_xlabel("cache size M(S_c), GB")
        cost_ax.set_ylabel("predicted C_a (AGBs)")
        time_ax.legend()
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
