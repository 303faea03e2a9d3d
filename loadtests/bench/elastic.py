"""Reproduce the adaptive-caching seed's evaluation (Tables I-IV) on this machine.

``python -m loadtests.bench.elastic`` runs the bulk-synchronous checkpointing application
(:mod:`loadtests.bench.checkpoint_app`) against three gateways started one after the
other, as the seed's section IV does:

* ``static-slow``: no cache, the backend throttled to B_b;
* ``static-fast``: no cache, the backend throttled to B_c (a fast disk at the cache's bandwidth);
* ``adaptive``: ``--cache-mode elastic`` in front of the B_b backend, volumes capped at B_c.

Before that it calibrates B(x) and D(x) (``squall calibrate``'s code, seed III-C) on
fresh gateways of the same three kinds, at the data sizes S_i and S_c and at the cache
sizes the elastic controller will choose, and predicts T and C_a (``predict``). It
prints completion time and overhead (Table I), total AGBs (Table II) and predicted over
measured T (Table III) and C_a (Table IV); ``--out DIR`` also saves the adaptive run's
I/O activity, cache size and accumulated cost as CSV and PNG (Fig. 3).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.core.units import parse_size
from gateway.cache.elastic import next_size
from gateway.cache.volumes import charge
from gateway.client.credentials import credentials_from_env
from gateway.cost.calibrate import GatewayClient, Plan, calibrate, wait_quiet
from gateway.cost.calibrate import configuration as calibrated
from gateway.cost.calibration import Configuration, parse_calibration
from gateway.cost.predict import Application, Prediction, predict, predict_schedule
from loadtests.bench.checkpoint_app import AppRun, AppShape, Sampler, run_app
from loadtests.bench.server import squall_credentials, squall_server

MB = 1_000_000
GRANULARITY = 1 << 20  # the elastic volumes' default granularity


@dataclass(frozen=True, slots=True)
class Setup:
    shape: AppShape
    slow: float  # B_b, bytes/s
    fast: float  # B_c, bytes/s
    initial_cache: int  # M(S_i), bytes
    inactivity_delay_s: float
    backend_size_gb: float  # N

    def args(self, name: str) -> list[str]:
        common = ["--cost-backend-size-gb", f"{self.backend_size_gb:g}",
                  "--inactivity-delay", f"{self.inactivity_delay_s:g}"]
        if name == "static-slow":
            return ["--cache-size", "0", "--backend-bandwidth", f"{self.slow:.0f}", *common]
        if name == "static-fast":
            return ["--cache-size", "0", "--backend-bandwidth", f"{self.fast:.0f}", *common]
        return ["--cache-mode", "elastic", "--cache-size", str(self.initial_cache),
                "--backend-bandwidth", f"{self.slow:.0f}", "--cache-volume-bandwidth",
                f"{self.fast:.0f}", *common]

    def schedule(self) -> list[int]:
        """The volume sizes the controller will pick for the K checkpoints: what the
        previous burst used (its data files: header + payload), rounded up."""
        s = self.shape
        sizes, previous = [], s.init_bytes
        for _ in range(s.checkpoints):
            files = -(-previous // s.object_size)
            used = previous + files * charge(0)
            sizes.append(next_size(0, used, 0, minimum=GRANULARITY, maximum=None,
                                   granularity=GRANULARITY))
            previous = s.checkpoint_bytes
        return sizes


NAMES = ("static-slow", "static-fast", "adaptive")


def _calibrate(setup: Setup, name: str, work: Path, env: dict[str, str]) -> Configuration:
    s = setup.shape
    caches = sorted({setup.initial_cache, *setup.schedule()})
    plan = Plan(sizes=sorted({s.checkpoint_bytes, s.init_bytes}), cache_sizes=caches,
                writers=s.writers, object_size=s.object_size, quiet_timeout_s=600)
    with squall_server(f"cal-{name}", setup.args(name), work, env) as server:
        gw = GatewayClient(server.endpoint, credentials_from_env(env))
        points = calibrate(gw, plan)
        doc = calibrated(gw.status(), points, name=name, providers=1,
                         backend_bandwidth_mb_s=(setup.fast if name == "static-fast"
                                                 else setup.slow) / MB,
                         backend_size_gb=setup.backend_size_gb,
                         cache_bandwidth_mb_s=setup.fast / MB)
    print(f"calibrated {name}: " + ", ".join(
        f"B_{p.cache_gb:g}({p.dataset_gb:g})={p.throughput_mb_s:.1f} MB/s "
        f"D={p.attach_s:.1f} s" for p in points), file=sys.stderr)
    (config,) = parse_calibration({"format": "squall-calibration", "version": 1,
                                   "configurations": [doc]})
    return config


@dataclass
class Outcome:
    name: str
    run: AppRun
    cost_agbs: float
    predicted: Prediction | None
    volumes: list[dict[str, Any]]


def _measure(setup: Setup, name: str, work: Path, env: dict[str, str]) -> Outcome:
    s = setup.shape
    with squall_server(name, setup.args(name), work, env) as server:
        gw = GatewayClient(server.endpoint, credentials_from_env(env))
        gw.request("PUT", "/app")
        before = gw.status()
        with Sampler(server.endpoint) as sampler:
            run = run_app(server.endpoint, "app", s, env)
            after = wait_quiet(gw, 600)  # the last checkpoint drained (volume detached)
        run.samples = [x for x in sampler.samples if x["at"] >= run.started_wall]
        if name != "adaptive":
            bandwidth = setup.slow if name == "static-slow" else setup.fast
            cost = bandwidth / MB * setup.backend_size_gb * run.completion_s
            return Outcome(name, run, cost, None, [])
        cache_gb_s = after["cost"]["cache_gb_seconds"] - before["cost"]["cache_gb_seconds"]
        cost = (setup.slow / MB * setup.backend_size_gb * run.completion_s
                + setup.fast / MB * cache_gb_s)
        volumes = [b for b in after["elastic"]["bursts"]
                   if b["attached_at"] >= run.started_wall - 1]
        return Outcome(name, run, cost, None, volumes)


def _application(setup: Setup) -> Application:
    s = setup.shape
    return Application(nodes=1, iterations=s.iterations, iteration_s=s.iteration_s,
                       checkpoints=s.checkpoints, checkpoint_gb=s.checkpoint_bytes / 1e9,
                       init_gb=s.init_bytes / 1e9, init_cache_gb=0.0)


def _predict(setup: Setup, name: str, config: Configuration) -> Prediction:
    app = _application(setup)
    if name != "adaptive":
        return predict(app, config, 0.0)
    from dataclasses import replace

    app = replace(app, init_cache_gb=setup.initial_cache / 1e9)
    return predict_schedule(app, config, [m / 1e9 for m in setup.schedule()])


def tables(outcomes: Sequence[Outcome]) -> str:
    by = {o.name: o for o in outcomes}
    fast = by.get("static-fast")
    lines = ["Table I - completion time", "",
             "| approach | completion time (s) | overhead vs static-fast |", "|---|---:|---:|"]
    for o in outcomes:
        over = "-" if fast is None or o is fast else \
            f"{100 * (o.run.completion_s / fast.run.completion_s - 1):+.1f} %"
        lines.append(f"| {o.name} | {o.run.completion_s:.1f} | {over} |")
    lines += ["", "Table II - total adjusted storage accumulation", "",
              "| approach | C_a (AGBs) | vs static-fast |", "|---|---:|---:|"]
    for o in outcomes:
        ratio = "-" if fast is None else f"{100 * o.cost_agbs / fast.cost_agbs:.1f} %"
        lines.append(f"| {o.name} | {o.cost_agbs:,.0f} | {ratio} |")
    tables: tuple[tuple[str, Callable[[Outcome], float], Callable[[Prediction], float]], ...]
    tables = (
            ("Table III - accuracy of the time prediction: predicted / measured T",
             lambda o: o.run.completion_s, lambda p: p.total_time_s),
            ("Table IV - accuracy of the cost prediction: predicted / measured C_a",
             lambda o: o.cost_agbs, lambda p: p.cost_agbs))
    for title, measured, predicted in tables:
        lines += ["", title, "", "| approach | predicted | measured | ratio |",
                  "|---|---:|---:|---:|"]
        for o in outcomes:
            if o.predicted is not None:
                p, m = predicted(o.predicted), measured(o)
                lines.append(f"| {o.name} | {p:,.1f} | {m:,.1f} | {p / m:.4f} |")
    return "\n".join(lines)


def save_series(outcome: Outcome, setup: Setup, out: Path) -> None:
    """CSV and PNG of I/O activity, cache size and accumulated cost (the seed's Fig. 3)."""
    rows, cache_gb_s = [], 0.0
    samples = outcome.run.samples
    t0 = outcome.run.started_wall
    for prev, cur in itertools.pairwise(samples):
        dt = cur["at"] - prev["at"]
        cache_gb_s += dt * (prev["cache_size_bytes"] + cur["cache_size_bytes"]) / 2 / 1e9
        t = cur["at"] - t0
        rows.append({"elapsed_s": t,
                     "ingest_rate_bytes_per_s": (cur["ingest_bytes_total"]
                                                 - prev["ingest_bytes_total"]) / max(dt, 1e-9),
                     "flush_rate_bytes_per_s": (cur["flush_bytes_total"]
                                                - prev["flush_bytes_total"]) / max(dt, 1e-9),
                     "cache_size_bytes": cur["cache_size_bytes"],
                     "cache_used_bytes": cur["cache_used_bytes"],
                     "dirty_bytes": cur["dirty_bytes"],
                     "cost_agbs": setup.slow / MB * setup.backend_size_gb * max(t, 0)
                     + setup.fast / MB * cache_gb_s})
    out.mkdir(parents=True, exist_ok=True)
    with (out / f"{outcome.name}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["elapsed_s"])
        writer.writeheader()
        writer.writerows(rows)
    try:
        from gateway.cost.plot import plot_series

        plot_series({k: [r[k] for r in rows] for k in (rows[0] if rows else {})},
                    out / f"{outcome.name}.png")
    except RuntimeError as exc:  # no matplotlib
        print(f"no plot: {exc}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtests.bench.elastic",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--writers", type=int, default=4, help="n writer processes")
    p.add_argument("--init", default="128MiB", help="S_i, all writers together")
    p.add_argument("--checkpoint", default="96MiB", help="S_c, all writers together")
    p.add_argument("--checkpoints", type=int, default=3, help="K")
    p.add_argument("--iterations", type=int, default=30, help="I")
    p.add_argument("--iteration-time", type=float, default=2.0, help="I_t, seconds")
    p.add_argument("--object-size", default="8MiB")
    p.add_argument("--slow", default="16MB/s", help="B_b (static-slow, adaptive backend)")
    p.add_argument("--fast", default="64MB/s", help="B_c (static-fast, cache volumes)")
    p.add_argument("--initial-cache", default="256MiB", help="M(S_i), the first volume")
    p.add_argument("--inactivity-delay", type=float, default=1.0, help="ID, seconds")
    p.add_argument("--backend-size-gb", type=float, default=1.25, help="N, GB")
    p.add_argument("--only", action="append", choices=NAMES, help="run only these")
    p.add_argument("--no-calibration", action="store_true", help="skip III-C predictions")
    p.add_argument("--out", type=Path, help="save the adaptive run's CSV and PNG here")
    args = p.parse_args(argv)
    from backends.core.units import parse_rate

    shape = AppShape(writers=args.writers, init_bytes=parse_size(args.init),
                     checkpoint_bytes=parse_size(args.checkpoint),
                     checkpoints=args.checkpoints, iterations=args.iterations,
                     iteration_s=args.iteration_time, object_size=parse_size(args.object_size))
    setup = Setup(shape, slow=parse_rate(args.slow), fast=parse_rate(args.fast),
                  initial_cache=parse_size(args.initial_cache),
                  inactivity_delay_s=args.inactivity_delay,
                  backend_size_gb=args.backend_size_gb)
    names = [n for n in NAMES if not args.only or n in args.only]
    env = squall_credentials("ELASTIC")
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="squall-elastic-") as tmp:
        work = Path(tmp)
        configs = {} if args.no_calibration else {n: _calibrate(setup, n, work, env)
                                                  for n in names}
        for name in names:
            print(f"running {name}: {' '.join(setup.args(name))}", file=sys.stderr)
            outcome = _measure(setup, name, work, env)
            if name in configs:
                outcome.predicted = _predict(setup, name, configs[name])
            outcomes.append(outcome)
            print(f"  T = {outcome.run.completion_s:.1f} s, C_a = {outcome.cost_agbs:,.0f} "
                  f"AGBs; phases " + ", ".join(f"{n} {s:.1f}" for n, s in outcome.run.phases),
                  file=sys.stderr)
    s = shape
    print(f"n={s.writers} writers, S_i={s.init_bytes / MB:g} MB, K={s.checkpoints} x "
          f"S_c={s.checkpoint_bytes / MB:g} MB, I={s.iterations} x I_t={s.iteration_s:g} s, "
          f"objects of {s.object_size / MB:g} MB; B_b={setup.slow / MB:g} MB/s, "
          f"B_c={setup.fast / MB:g} MB/s, N={setup.backend_size_gb:g} GB, "
          f"M(S_i)={setup.initial_cache / MB:g} MB, UT=0.3, ID={setup.inactivity_delay_s:g} s\n")
    print(tables(outcomes))
    for o in outcomes:
        if o.volumes:
            print(f"\n{o.name} volumes (size MB, attached s, used peak MB, forced MB): " + "; ".join(
                f"{v['size_bytes'] / MB:.0f}, {v['detached_at'] - v['attached_at']:.1f}, "
                f"{v['used_peak_bytes'] / MB:.0f}, {v['forced_bytes'] / MB:.0f}"
                for v in o.volumes))
            if args.out:
                save_series(o, setup, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
