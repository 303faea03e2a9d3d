"""Prices, costs, predictions and the tables of the MPI seed benchmark
(:mod:`loadtests.bench.mpi_seed`): Tables I-IV of the adaptive-caching seed and the
burst-buffer headline, ratios side by side."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import mean

from gateway.cost.calibration import Configuration, parse_calibration
from gateway.cost.predict import Application, Prediction, predict, predict_schedule
from loadtests.bench.mpi_seed_runs import Outcome, Shape

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
           "points": [{"cache_gb": p.cache_gb, "dataset_gb": p.dataset_gb,
                       "throughput_mb_s": p.throughput_mb_s, "attach_s": p.attach_s}
                      for p in o.points]}
    (config,) = parse_calibration({"format": "squall-calibration", "version": 1,
                                   "configurations": [doc]})
    return config


def prediction(o: Outcome, shape: Shape, prices: Prices, baseline_s: float) -> Prediction:
    """T and C_a predicted (seed III-C) from the calibration and the compute baseline."""
    s_c = shape.model.total_bytes / GB
    app = Application(nodes=1, iterations=shape.iterations,
                      iteration_s=baseline_s / max(shape.iterations, 1),
                      checkpoints=shape.checkpoints, checkpoint_gb=s_c, init_gb=s_c,
                      init_cache_gb=0.0)
    config = configuration(o, prices)
    if o.name != "adaptive":
        return predict(app, config, 0.0)
    sizes = [v["size_bytes"] / GB for v in sorted(o.volumes, key=lambda v: v["attached_at"])]
    if len(sizes) != shape.checkpoints + 1:
        raise RuntimeError(f"adaptive attached {len(sizes)} volumes, not one per burst "
                           f"({shape.checkpoints + 1}): no schedule to predict with")
    return predict_schedule(replace(app, init_cache_gb=sizes[0]), config, sizes[1:])


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["", title, "", "| " + " | ".join(header) + " |",
            "|---|" + "---:|" * (len(header) - 1), *("| " + " | ".join(r) + " |" for r in rows)]


def render(shape: Shape, outcomes: Sequence[Outcome], prices: Prices, *, baseline_s: float,
           initial_cache_mb: float, inactivity_delay_s: float) -> str:
    m = shape.model
    by = {o.name: o for o in outcomes}
    fast, slow = by["static-fast"], by["static-slow"]
    costs = {o.name: prices.cost(o) for o in outcomes}
    predicted: dict[str, Prediction | str] = {}
    for o in outcomes:
        try:
            predicted[o.name] = prediction(o, shape, prices, baseline_s)
        except (RuntimeError, ValueError) as exc:
            predicted[o.name] = str(exc)
    lines = [(f"application: {m.np} ranks, IOR model `{m.ior_args()}` "
             f"({'file per process' if m.mode == 'nn' else 'one shared file'}), "
             f"S_i = S_c = {m.total_bytes / MB:.1f} MB; I = {shape.iterations} stencil sweeps, "
             f"I x I_t = {baseline_s:.1f} s without I/O; K = {shape.checkpoints}"),
             (f"prices: B_b = {prices.slow_mb_s:.1f} MB/s (the store through the mount, "
             f"calibrated), B_c = {prices.fast_mb_s:.1f} MB/s (the cache, calibrated), "
             f"N = {prices.backend_size_gb:g} GB; adaptive: M(S_i) = {initial_cache_mb:g} MB, "
             f"ID = {inactivity_delay_s:g} s")]
    lines += _table("Table I - completion time", ["approach", "T (s)", "vs static-fast"],
                    [[o.name, f"{o.completion_s:.1f}",
                      "-" if o is fast else
                      f"{100 * (o.completion_s / fast.completion_s - 1):+.1f} %"]
                     for o in outcomes])
    lines += _table("Table II - total adjusted storage accumulation",
                    ["approach", "C_a (AGBs)", "vs static-fast"],
                    [[o.name, f"{costs[o.name]:,.0f}",
                      f"{100 * costs[o.name] / costs['static-fast']:.1f} %"] for o in outcomes])
    checks: tuple[tuple[str, Callable[[Outcome], float], Callable[[Prediction], float]], ...]
    checks = (("Table III - time prediction: predicted / measured T",
               lambda o: o.completion_s, lambda p: p.total_time_s),
              ("Table IV - cost prediction: predicted / measured C_a",
               lambda o: costs[o.name], lambda p: p.cost_agbs))
    for title, measured, guess in checks:
        rows = []
        for o in outcomes:
            p = predicted[o.name]
            if isinstance(p, str):
                rows.append([o.name, "-", f"{measured(o):,.1f}", f"no prediction: {p}"])
            else:
                rows.append([o.name, f"{guess(p):,.1f}", f"{measured(o):,.1f}",
                             f"{guess(p) / measured(o):.4f}"])
        lines += _table(title, ["approach", "predicted", "measured", "ratio"], rows)
    store_w, store_r = mean(slow.phase("init") + slow.phase("ckpt")), slow.restart_s
    rows = []
    for o in outcomes:
        w = mean(o.phase("init") + o.phase("ckpt"))
        rows.append([o.name, f"{w:.2f}", f"{m.total_bytes / MB / w:.0f}",
                     f"{store_w / w:.2f}x", f"{o.restart_s:.2f}",
                     f"{m.total_bytes / MB / o.restart_s:.0f}", f"{store_r / o.restart_s:.2f}x"])
    lines += _table("Burst buffer: checkpoint write and restart read through Squall vs "
                    "straight to the store (static-slow)",
                    ["approach", "checkpoint write (s)", "MB/s", "speed-up", "restart read (s)",
                     "MB/s", "speed-up"], rows)
    lines.append("")
    for o in outcomes:
        note = f"{o.name}: phases " + ", ".join(f"{n} {s:.2f}" for n, s in o.phases)
        note += f"; restart {o.restart_s:.2f} s; {o.verified_blocks} blocks checked on the store"
        note += "; calibrated " + ", ".join(
            f"B_{p.cache_gb * 1000:.0f}MB = {p.throughput_mb_s:.1f} MB/s, D = {p.attach_s:.1f} s"
            for p in o.points)
        if o.volumes:
            note += "; volumes (MB, attached s, peak MB): " + "; ".join(
                f"{v['size_bytes'] / MB:.0f}, {v['detached_at'] - v['attached_at']:.1f}, "
                f"{v['used_peak_bytes'] / MB:.0f}" for v in o.volumes)
            note += f"; int M = {o.cache_gb_s:.2f} GB*s"
        lines.append(f"* {note}")
    return "\n".join(lines)
