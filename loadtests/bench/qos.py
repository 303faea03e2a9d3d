"""G-states against static caps at the same bill and an I/O credit scheme (seed: IOTune,
section 4), at small scale.

``python -m loadtests.bench.qos [--shape checkpoint|intensive]`` starts one gateway in
front of a throttled backend and runs two tenants (buckets) at once. Shape
``checkpoint`` (the default):

* *bursty*: a checkpointing code. At the start of every ``--period`` seconds,
  ``--burst-writers`` writers each PUT ``--burst-objects`` objects one after the other
  (open loop: a checkpoint starts on time even if the previous one is still running).
  It reports the checkpoint completion time (p50/p99 over checkpoints) and the latency
  of every PUT (a PUT refused with 503 SlowDown is retried; its latency includes it);
* *steady*: ``--steady-rate`` PUTs per second.

Shape ``intensive`` (the seed's phased trace, section 4.2, and its long intensive
periods, 4.3.1): the *phased* tenant's demand steps up through phases at 0.8, 1.6, 3.2
and 6.4 x G0 (80% of gear 0..3's cap, as the seed's 500..4000 IOPS against gears of
600..4800), holds the last for a long intensive period, then falls back to 0.8 x G0.
Arrivals are open loop (Poisson at the phase's rate, the same seeded schedule in every
mode) and a PUT's latency is counted from its scheduled arrival, so it includes the
queueing; PUTs not done ``--drain`` seconds after the last arrival are *unfinished*
(their age then counts as a lower bound of their latency). The *steady* tenant runs
beside it.

Three modes, each on fresh buckets (checkpoint: ``--duration`` seconds, default 45, about
three minutes in all; intensive: the phases, 42 s, under three minutes in all):

* ``g-states``: each tenant a class G0 with gears up to ``--max-gear`` (docs/qos.md);
* ``static``: each tenant a static cap (``max_gear = 0``) equal to the average bandwidth
  its class reserved in the g-states run: the same bill;
* ``credit``: a leaky-bucket credit scheme (EBS gp2): baseline G0, credits earned at G0
  and held up to ``--credit-s`` seconds of it, spent to burst up to the top gear's cap;
  billed at its baseline, as gp2 bills the volume and not its bursts.

It prints per tenant and mode the PUT latency p50/p99, the checkpoint times, the
throughput, the refusals and the bill (reserved MB and AGBs), then the bill of each mode;
``--out DIR`` saves the gears over time as CSV, and as PNG when matplotlib is installed.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config
from botocore.exceptions import ClientError

from gateway.client.credentials import credentials_from_env
from gateway.client.failures import ClientFailure
from gateway.cost.calibrate import GatewayClient, wait_quiet
from loadtests.bench.server import squall_credentials, squall_server

MB = 1_000_000
SHAPES = ("checkpoint", "intensive")
MODES = ("g-states", "static", "credit")
#: the intensive shape's phases: (seconds, demand in multiples of G0)
PHASES: tuple[tuple[float, float], ...] = ((6.0, 0.8), (5.0, 1.6), (5.0, 3.2), (20.0, 6.4),
                                           (6.0, 0.8))


@dataclass(frozen=True, slots=True)
class Shape:
    name: str = "checkpoint"
    duration_s: float = 45.0  # checkpoint shape; intensive: the phases' sum
    period_s: float = 10.0  # a checkpoint starts every period
    burst_writers: int = 4
    burst_objects: int = 4  # objects per writer and checkpoint
    steady_rate: float = 3.0  # PUTs per second of the steady tenant
    object_size: int = 256 * 1024
    g0_bytes_per_s: float = 0.5 * MB
    max_gear: int = 3
    credit_s: float = 20.0  # the credit scheme's balance cap, in seconds of G0
    backend_bytes_per_s: float = 16 * MB
    # The gateway's default is the seed's 1 s; bursts here last seconds, and 0.5 s measured
    # better for every tenant of both shapes (docs/qos.md, "Benchmark").
    interval_s: float = 0.5
    max_wait_s: float = 5.0
    backend_size_gb: float = 10.0
    phases: tuple[tuple[float, float], ...] = PHASES
    drain_s: float = 5.0  # intensive: how long PUTs may finish after the last arrival
    seed: int = 20  # intensive: the arrival schedule

    @property
    def tenants(self) -> tuple[str, str]:
        return ("bursty", "steady") if self.name == "checkpoint" else ("phased", "steady")

    @property
    def length_s(self) -> float:
        """Seconds of load per mode."""
        if self.name == "checkpoint":
            return self.duration_s
        return sum(seconds for seconds, _ in self.phases)

    def arrivals(self) -> list[float]:
        """The phased tenant's arrival times: Poisson at each phase's rate."""
        rng, times, start = random.Random(self.seed), [], 0.0
        for seconds, multiple in self.phases:
            rate = multiple * self.g0_bytes_per_s / self.object_size  # PUTs per second
            t = start + rng.expovariate(rate)
            while t < start + seconds:
                times.append(t)
                t += rng.expovariate(rate)
            start += seconds
        return times


def _quantile(values: Sequence[float], q: float, censored: Sequence[float] = ()) -> tuple[
        float, bool]:
    """The ``q`` quantile of ``values`` and of lower bounds ``censored``; True when it is
    one of the lower bounds (the true quantile is at least that)."""
    ordered = sorted([(v, False) for v in values] + [(v, True) for v in censored])
    if not ordered:
        return float("nan"), False
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class TenantResult:
    mode: str
    tenant: str
    latencies: list[float] = field(default_factory=list)
    checkpoints: list[float] = field(default_factory=list)  # completion times, s
    refused: int = 0
    bytes: int = 0
    reserved_mb: float = 0.0
    unfinished: list[float] = field(default_factory=list)  # ages at the cut-off, s

    def percentile(self, q: float) -> float:
        return _quantile(self.latencies, q, self.unfinished)[0]

    def percentile_text(self, q: float) -> str:
        value, censored = _quantile(self.latencies, q, self.unfinished)
        return (">=" if censored else "") + _ms(value)

    def checkpoint_percentile(self, q: float) -> float:
        return _quantile(self.checkpoints, q)[0]


def _client(endpoint: str, env: dict[str, str]) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=env["SQUALL_ACCESS_KEY"],
                        aws_secret_access_key=env["SQUALL_SECRET_KEY"],
                        config=Config(retries={"max_attempts": 1},
                                      max_pool_connections=OPEN_LOOP_THREADS,
                                      s3={"addressing_style": "path"}))


#: the open-loop tenant's concurrent PUTs (more arrivals wait for one of them)
OPEN_LOOP_THREADS = 64


def _put(client: Any, bucket: str, key: str, body: bytes, result: TenantResult,
         lock: threading.Lock, *, since: float | None = None,
         stop: threading.Event | None = None) -> None:
    """One PUT, retried after a SlowDown (as a client does). Its latency counts from
    ``since`` (a scheduled arrival; default: now). Once ``stop`` is set, a PUT not yet
    sent, or refused, is given up and counted unfinished with its age."""
    started = time.monotonic() if since is None else since
    while True:
        if stop is not None and stop.is_set():
            with lock:
                result.unfinished.append(time.monotonic() - started)
            return
        try:
            client.put_object(Bucket=bucket, Key=key, Body=body)
            break
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "SlowDown":
                raise
            with lock:
                result.refused += 1
            headers = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
            time.sleep(min(1.0, float(headers.get("retry-after") or 1)))
    with lock:
        result.latencies.append(time.monotonic() - started)
        result.bytes += len(body)


def _run_tenants(endpoint: str, env: dict[str, str], shape: Shape, buckets: dict[str, str],
                 results: dict[str, TenantResult], sampler: Any) -> None:
    body = os.urandom(shape.object_size)
    lock = threading.Lock()
    errors: list[Exception] = []
    start = time.monotonic()
    end = start + shape.length_s

    def guarded(target: Any, *args: Any) -> None:
        try:
            target(*args)
        except Exception as exc:  # noqa: BLE001 - re-raised by the caller after the join
            errors.append(exc)

    def writer(n: int, w: int) -> None:
        client = _client(endpoint, env)
        for k in range(shape.burst_objects):
            _put(client, buckets["bursty"], f"c{n}/w{w}/{k}", body, results["bursty"], lock)

    def checkpoint(n: int, due: float) -> None:
        writers = [threading.Thread(target=guarded, args=(writer, n, w))
                   for w in range(shape.burst_writers)]
        for t in writers:
            t.start()
        for t in writers:
            t.join()
        with lock:
            results["bursty"].checkpoints.append(time.monotonic() - due)

    def bursty() -> None:
        checkpoints, n = [], 0
        while (due := start + n * shape.period_s) < end:
            time.sleep(max(0.0, due - time.monotonic()))
            t = threading.Thread(target=guarded, args=(checkpoint, n, due))
            t.start()
            checkpoints.append(t)
            n += 1
        for t in checkpoints:
            t.join()

    def steady() -> None:
        client, n = _client(endpoint, env), 0
        while (due := start + n / shape.steady_rate) < end:
            time.sleep(max(0.0, due - time.monotonic()))
            _put(client, buckets["steady"], f"s/{n}", body, results["steady"], lock)
            n += 1

    def phased() -> None:
        local, stop = threading.local(), threading.Event()

        def one(n: int, due: float) -> None:
            if not hasattr(local, "client"):
                local.client = _client(endpoint, env)
            _put(local.client, buckets["phased"], f"p/{n}", body, results["phased"], lock,
                 since=due, stop=stop)

        with ThreadPoolExecutor(OPEN_LOOP_THREADS, thread_name_prefix="phased") as pool:
            futures = []
            for n, at in enumerate(shape.arrivals()):
                time.sleep(max(0.0, start + at - time.monotonic()))
                futures.append(pool.submit(one, n, start + at))
            cut_off = end + shape.drain_s
            for future in futures:
                try:
                    future.result(timeout=max(0.0, cut_off - time.monotonic()))
                except FuturesTimeout:
                    break
            stop.set()  # the rest: given up once refused or not yet sent
            for future in futures:
                future.result()

    first = bursty if shape.name == "checkpoint" else phased
    threads = [threading.Thread(target=guarded, args=(f,)) for f in (first, steady)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        sampler(time.monotonic() - start)
        time.sleep(0.25)
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"a tenant failed: {errors[0]!r}") from errors[0]


def _class(shape: Shape, mode: str, bucket: str, g0: float) -> dict[str, str]:
    params = {"bucket": bucket, "g0_bandwidth": f"{g0:.0f}",
              "max_gear": str(0 if mode == "static" else shape.max_gear)}
    if mode == "credit":
        params["credit_s"] = f"{shape.credit_s:g}"
    return params


def run(shape: Shape, work: Path, out: Path | None = None) -> list[TenantResult]:
    """The three modes against one gateway; results by mode, then tenant."""
    env = squall_credentials("QOS")
    config = work / "qos.toml"
    work.mkdir(parents=True, exist_ok=True)
    config.write_text(f"[qos]\ninterval = {shape.interval_s}\n"
                      f"max_wait = {shape.max_wait_s}\n")
    args = ["--config", str(config), "--backend-bandwidth", f"{shape.backend_bytes_per_s:.0f}",
            "--cost-backend-size-gb", f"{shape.backend_size_gb:g}"]
    results: list[TenantResult] = []
    trace: list[dict[str, Any]] = []
    with squall_server("qos", args, work, env) as server:
        gw = GatewayClient(server.endpoint, credentials_from_env(env))
        s3 = _client(server.endpoint, env)
        tenants = shape.tenants
        same_bill = {t: shape.g0_bytes_per_s for t in tenants}  # set by the g-states run
        for mode in MODES:
            buckets = {t: f"{mode}-{t}" for t in tenants}
            for tenant, bucket in buckets.items():
                s3.create_bucket(Bucket=bucket)
                g0 = same_bill[tenant] if mode == "static" else shape.g0_bytes_per_s
                gw.request("PUT", "/_squall/qos", params=_class(shape, mode, bucket, g0))
            mode_results = {t: TenantResult(mode, t) for t in tenants}

            def sample(at: float, mode: str = mode, buckets: dict[str, str] = buckets) -> None:
                qos = (gw.status().get("qos") or {}).get("buckets") or {}
                trace.append({"mode": mode, "t": round(at, 2), **{
                    t: qos.get(b, {}).get("gear", 0) for t, b in buckets.items()}})

            _run_tenants(server.endpoint, env, shape, buckets, mode_results, sample)
            qos = (gw.status().get("qos") or {}).get("buckets") or {}
            for tenant, bucket in buckets.items():
                cls = qos[bucket]
                g0 = float(cls["class"]["g0_bandwidth"])
                reserved = cls["gear_seconds"] * g0 / MB
                mode_results[tenant].reserved_mb = reserved
                if mode == "g-states":  # the static run gets the bandwidth reserved here
                    same_bill[tenant] = reserved * MB / max(sum(cls["seconds_at_gear"]),
                                                            1e-9)
                gw.request("DELETE", "/_squall/qos", params={"bucket": bucket})
            results += mode_results.values()
            wait_quiet(gw, timeout_s=120.0)
    if out is not None:
        _save_trace(trace, out, tenants)
    return results


def _save_trace(trace: list[dict[str, Any]], out: Path, tenants: Sequence[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "qos-gears.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["mode", "t", *tenants])
        writer.writeheader()
        writer.writerows(trace)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)",
              file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 3))
    for tenant in tenants:
        points = [(p["t"], p[tenant]) for p in trace if p["mode"] == "g-states"]
        ax.step([t for t, _ in points], [g for _, g in points], where="post", label=tenant)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("gear n (cap = 2^n x G0)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "qos-gears.png", dpi=120)
    plt.close(fig)


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{1000 * seconds:.0f}"


def table(results: Sequence[TenantResult], shape: Shape) -> str:
    """The per-tenant table, then the bill of each mode (Markdown)."""
    rows = [("| mode | tenant | PUTs | unfinished | p50 ms | p99 ms | checkpoints | "
             "ckpt p50 ms | ckpt p99 ms | MB/s | refused | reserved MB | bill AGBs |"),
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        rows.append(f"| {r.mode} | {r.tenant} | {len(r.latencies)} | {len(r.unfinished)} | "
                    f"{r.percentile_text(0.5)} | {r.percentile_text(0.99)} | "
                    f"{len(r.checkpoints) or '-'} | {_ms(r.checkpoint_percentile(0.5))} | "
                    f"{_ms(r.checkpoint_percentile(0.99))} | "
                    f"{r.bytes / MB / shape.length_s:.2f} | {r.refused} | "
                    f"{r.reserved_mb:.1f} | {r.reserved_mb * shape.backend_size_gb:.0f} |")
    rows += ["", "| mode | bill AGBs (both tenants) |", "|---|---:|"]
    for mode in dict.fromkeys(r.mode for r in results):
        total = sum(r.reserved_mb for r in results if r.mode == mode)
        rows.append(f"| {mode} | {total * shape.backend_size_gb:.0f} |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    d = Shape()
    p = argparse.ArgumentParser(prog="python -m loadtests.bench.qos", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", choices=SHAPES, default=d.name,
                   help="checkpoint: periodic bursts; intensive: the seed's phased trace")
    p.add_argument("--duration", type=float, default=d.duration_s,
                   help="checkpoint shape: seconds per mode")
    p.add_argument("--period", type=float, default=d.period_s,
                   help="seconds between checkpoints")
    p.add_argument("--burst-writers", type=int, default=d.burst_writers,
                   help="writers per checkpoint")
    p.add_argument("--burst-objects", type=int, default=d.burst_objects,
                   help="objects per writer and checkpoint")
    p.add_argument("--steady-rate", type=float, default=d.steady_rate, help="PUTs/s")
    p.add_argument("--object-size", type=int, default=d.object_size, help="bytes")
    p.add_argument("--g0", type=float, default=d.g0_bytes_per_s, help="G0 bytes/s")
    p.add_argument("--max-gear", type=int, default=d.max_gear)
    p.add_argument("--credit-s", type=float, default=d.credit_s,
                   help="credit scheme: balance cap in seconds of G0")
    p.add_argument("--backend-bandwidth", type=float, default=d.backend_bytes_per_s,
                   help="bytes/s")
    p.add_argument("--interval", type=float, default=d.interval_s, help="tuning period, s")
    p.add_argument("--drain", type=float, default=d.drain_s,
                   help="intensive shape: seconds PUTs may finish after the last arrival")
    p.add_argument("--out", type=Path, help="directory for qos-gears.csv/.png")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    a = p.parse_args(argv)
    shape = Shape(name=a.shape, duration_s=a.duration, drain_s=a.drain, period_s=a.period,
                  burst_writers=a.burst_writers,
                  burst_objects=a.burst_objects, steady_rate=a.steady_rate,
                  object_size=a.object_size, g0_bytes_per_s=a.g0, max_gear=a.max_gear,
                  credit_s=a.credit_s, backend_bytes_per_s=a.backend_bandwidth,
                  interval_s=a.interval)
    with tempfile.TemporaryDirectory(prefix="squall-qos-bench-") as tmp:
        try:
            results = run(shape, Path(tmp), a.out)
        except (httpx.HTTPError, ClientError, ClientFailure, RuntimeError) as exc:
            print(f"qos benchmark: {exc}", file=sys.stderr)
            return 1
    if a.json:
        print(json.dumps([asdict(r) | {
            "p50_s": r.percentile(0.5), "p99_s": r.percentile(0.99),
            "checkpoint_p50_s": r.checkpoint_percentile(0.5),
            "checkpoint_p99_s": r.checkpoint_percentile(0.99)} for r in results], indent=2))
    else:
        print(table(results, shape))
    return 0


if __name__ == "__main__":
    sys.exit(main())
