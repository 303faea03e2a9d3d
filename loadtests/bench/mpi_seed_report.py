"""Prices, costs, predictions and the tables of the MPI seed benchmark
(:mod:`loadtests.bench.mpi_seed`): Tables I-IV of the adaptive-caching seed and the
burst-buffer headline, ratios side by side. With repeated runs every figure is the
median of the runs and its spread (min-max)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from statistics import mean

from gateway.cost.calibration import Configuration, parse_calibration
from gateway.cost.predict import Application, Prediction, predict, predict_schedule
from loadtests.bench.mpi_seed_runs import Outcome, Shape
from loadtests.bench.mpi_seed_stats import cell

MB, GB = 1_000_000, 1_000_000_000


@dataclass(frozen=True, slots=True)
class Prices:
    """The seed's cost model: a disk costs bandwidth (MB/s) x size N (GB) per second."""

    slow_mb_s: float  # B_b: the store, as the application's checkpoints see it
    fast_mb_s: float  # B_c: the cache
    backend_size_gb: float  # N

    @classmethod
    def calibrated(cls, outcomes: Sequence[Outcome], *, backend_size_gb: float) -> Prices:
        """B_b and B_c from the calibration of static-slow and static-fast."""
        by = {o.name: o for o in outcomes}
        return cls(by["static-slow"].points[0].throughput_mb_s,
                   by["static-fast"].points[0].throughput_mb_s, backend_size_gb)

    def cost(self, o: Outcome) -> float:
        """C_a in AGBs, as measured."""
        if o.name == "static-fast":
            return self.fast_mb_s * self.backend_size_gb * o.completion_s
        cache = self.fast_mb_s * o.cache_gb_s if o.name == "adaptive" else 0.0
        return self.slow_mb_s * self.backend_size_gb * o.completion_s + cache


def configuration(o: Outcome, prices: Prices) -> Configuration:
    """The calibration of one configuration, as ``squall calibrate`` would save it."""
    elastic = o.name == "adaptive"
    doc = {"name": o.name, "backend": "s3", "providers": 1,
           "backend_bandwidth_mb_s": prices.fast_mb_s if o.name == "static-fast"
           else prices.slow_mb_s,
           "backend_size_gb": prices.backend_size_gb,
           "cache_bandwidth_mb_s": prices.fast_mb_s if elastic else 0.0,
           "points": [asdict(p) for p in o.points]}
    (config,) = parse_calibration({"format": "squall-calibration", "version": 1,
                                   "configurations": [doc]})
    return config


@dataclass(frozen=True, slots=True)
class Run:
    """One run of every configuration: what each measured, the prices calibrated in the
    run, and the application's time without I/O (I x I_t)."""

    outcomes: tuple[Outcome, ...]
    prices: Prices
    baseline_s: float

    def by_name(self) -> dict[str, Outcome]:
        return {o.name: o for o in self.outcomes}


def schedule(o: Outcome, shape: Shape) -> tuple[float, list[float]]:
    """M(S_i) and the M of each checkpoint (GB) of an adaptive run, from the volumes it
    attached: one per burst when it attached one per burst; otherwise the first volume
    for the initial dump and the last one (what the controller learned) for every
    checkpoint. The calibration measured B and D at each of these sizes."""
    sizes = [v["size_bytes"] / GB for v in sorted(o.volumes, key=lambda v: v["attached_at"])]
    if not sizes:
        raise RuntimeError("adaptive attached no volume: no schedule to predict with")
    if len(sizes) == shape.checkpoints + 1:
        return sizes[0], sizes[1:]
    return sizes[0], [sizes[-1]] * shape.checkpoints


def prediction(o: Outcome, shape: Shape, prices: Prices, baseline_s: float) -> Prediction:
    """T and C_a predicted (seed III-C) from what the run calibrated: B(x) and D(x) at
    the cache sizes the run used, B_b and B_c, and the compute baseline I x I_t."""
    s_c = shape.model.total_bytes / GB
    app = Application(nodes=1, iterations=shape.iterations,
                      iteration_s=baseline_s / max(shape.iterations, 1),
                      checkpoints=shape.checkpoints, checkpoint_gb=s_c, init_gb=s_c,
                      init_cache_gb=0.0)
    config = configuration(o, prices)
    if o.name != "adaptive":
        return predict(app, config, 0.0)
    first, rest = schedule(o, shape)
    return predict_schedule(replace(app, init_cache_gb=first), config, rest)


Figures = dict[str, float]  # one approach's figures in one run, by name


def figures(shape: Shape, run: Run) -> tuple[dict[str, Figures], dict[str, str]]:
    """Every figure of every approach in one run, and why a prediction is missing."""
    m = shape.model
    by = run.by_name()
    fast, slow = by["static-fast"], by["static-slow"]
    prices = run.prices
    fast_cost = prices.cost(fast)
    store_w, store_r = mean(slow.phase("init") + slow.phase("ckpt")), slow.restart_s
    out: dict[str, Figures] = {}
    failed: dict[str, str] = {}
    nan = float("nan")
    for o in run.outcomes:
        cost = prices.cost(o)
        write = mean(o.phase("init") + o.phase("ckpt"))
        f = {"T": o.completion_s, "T_vs_fast": 100 * (o.completion_s / fast.completion_s - 1),
             "C": cost, "C_vs_fast": 100 * cost / fast_cost,
             "write_s": write, "write_mb_s": m.total_bytes / MB / write,
             "write_speedup": store_w / write, "restart_s": o.restart_s,
             "restart_mb_s": m.total_bytes / MB / o.restart_s,
             "restart_speedup": store_r / o.restart_s, "gb_s": o.cache_gb_s,
             "T_pred": nan, "T_ratio": nan, "C_pred": nan, "C_ratio": nan, "P_pred": nan}
        try:
            p = prediction(o, shape, prices, run.baseline_s)
        except (RuntimeError, ValueError) as exc:
            failed[o.name] = str(exc)
        else:
            f.update(T_pred=p.total_time_s, T_ratio=p.total_time_s / o.completion_s,
                     P_pred=p.compute_slowdown_s,
                     C_pred=p.cost_agbs, C_ratio=p.cost_agbs / cost)
        out[o.name] = f
    return out, failed


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["", title, "", "| " + " | ".join(header) + " |",
            "|---|" + "---:|" * (len(header) - 1), *("| " + " | ".join(r) + " |" for r in rows)]


def render(shape: Shape, runs: Sequence[Run], *, initial_cache_mb: float,
           inactivity_delay_s: float) -> str:
    """Tables I-IV and the burst-buffer table; with several runs each cell is the median
    and, in brackets, the lowest and highest value of the runs."""
    if not runs:
        raise ValueError("no run to report")
    m = shape.model
    names = [o.name for o in runs[0].outcomes]
    per_run = [figures(shape, r) for r in runs]

    def values(name: str, key: str) -> list[float]:
        return [figs[name][key] for figs, _ in per_run if name in figs]

    def c(name: str, key: str, spec: str, suffix: str = "") -> str:
        return cell(values(name, key), spec, suffix=suffix)

    def run_values(get: Callable[[Run], float]) -> list[float]:
        return [get(r) for r in runs]

    lines = [f"{len(runs)} run(s); every figure is the median of the runs"
             + (", (min-max) over them" if len(runs) > 1 else ""),
             (f"application: {m.np} ranks, IOR model `{m.ior_args()}` "
              f"({'file per process' if m.mode == 'nn' else 'one shared file'}), "
              f"S_i = S_c = {m.total_bytes / MB:.1f} MB; I = {shape.iterations} stencil "
              f"sweeps, I x I_t = {cell(run_values(lambda r: r.baseline_s), '.1f')} s "
              f"without I/O; K = {shape.checkpoints}"),
             (f"prices: B_b = {cell(run_values(lambda r: r.prices.slow_mb_s), '.1f')} MB/s "
              f"(the store through the mount, calibrated), B_c = "
              f"{cell(run_values(lambda r: r.prices.fast_mb_s), '.1f')} MB/s (the cache, "
              f"calibrated), N = {runs[0].prices.backend_size_gb:g} GB; adaptive: "
              f"M(S_i) = {initial_cache_mb:g} MB, ID = {inactivity_delay_s:g} s")]
    lines += _table("Table I - completion time", ["approach", "T (s)", "vs static-fast"],
                    [[n, c(n, "T", ".1f"),
                      "-" if n == "static-fast" else c(n, "T_vs_fast", "+.1f", " %")]
                     for n in names])
    lines += _table("Table II - total adjusted storage accumulation",
                    ["approach", "C_a (AGBs)", "vs static-fast"],
                    [[n, c(n, "C", ",.0f"), c(n, "C_vs_fast", ".1f", " %")] for n in names])
    for title, key, spec in (("Table III - time prediction: predicted / measured T", "T",
                              ".1f"),
                             ("Table IV - cost prediction: predicted / measured C_a", "C",
                              ",.1f")):
        rows = []
        for n in names:
            ratios = values(n, f"{key}_ratio")
            errors = [100 * (r - 1) for r in ratios]
            why = sorted({f[n] for _, f in per_run if n in f})
            error = cell(errors, "+.1f", suffix=" %",
                         missing="no prediction: " + "; ".join(why))
            if why and any(math.isfinite(e) for e in errors):
                error += f" ({len(why)} run(s) without: {'; '.join(why)})"
            rows.append([n, c(n, f"{key}_pred", spec), c(n, key, spec),
                         c(n, f"{key}_ratio", ".4f"), error, c(n, "P_pred", ".1f")])
        lines += _table(title, ["approach", "predicted", "measured", "ratio", "error",
                                "of it P (s)"], rows)
    lines += _table("Burst buffer: checkpoint write and restart read through Squall vs "
                    "straight to the store (static-slow)",
                    ["approach", "checkpoint write (s)", "MB/s", "speed-up", "restart read (s)",
                     "MB/s", "speed-up"],
                    [[n, c(n, "write_s", ".2f"), c(n, "write_mb_s", ".0f"),
                      c(n, "write_speedup", ".2f", "x"), c(n, "restart_s", ".2f"),
                      c(n, "restart_mb_s", ".0f"), c(n, "restart_speedup", ".2f", "x")]
                     for n in names])
    lines.append("")
    for i, run in enumerate(runs, 1):
        for o in run.outcomes:
            lines.append(f"* run {i}, {_note(o)}")
    return "\n".join(lines)


def _note(o: Outcome) -> str:
    """One configuration's phases, restart, calibration and volumes."""
    note = f"{o.name}: phases " + ", ".join(f"{n} {s:.2f}" for n, s in o.phases)
    note += f"; restart {o.restart_s:.2f} s; {o.verified_blocks} blocks checked on the store"
    note += "; calibrated " + ", ".join(
        f"B_{p.cache_gb * 1000:.0f}MB = {p.throughput_mb_s:.1f} MB/s, D = {p.attach_s:.1f} s, "
        f"P = {p.compute_slowdown_s:.2f} s" for p in o.points)
    if o.volumes:
        note += "; volumes (MB, attached s, peak MB, needed MB over s): " + "; ".join(
            f"{v['size_bytes'] / MB:.0f}, {v['detached_at'] - v['attached_at']:.1f}, "
            f"{v['used_peak_bytes'] / MB:.0f}, {v.get('needed_bytes', 0) / MB:.0f} over "
            f"{v.get('arrival_s', 0.0):.1f}" for v in o.volumes)
        note += f"; int M = {o.cache_gb_s:.2f} GB*s"
    return note
