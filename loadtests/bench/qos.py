"""G-states against static caps at the same bill (seed: IOTune, section V), small scale.

``python -m loadtests.bench.qos`` starts one gateway in front of a throttled backend and
runs two tenants (buckets) at once: a *bursty* one (``--burst-writers`` writers for
``--on`` seconds, then nothing for ``--off`` seconds) and a *steady* one (a fixed rate of
PUTs). It runs them twice, on fresh buckets:

* ``g-states``: each tenant a class G0 with gears up to ``--max-gear`` (docs/qos.md);
* ``static``: each tenant a static cap (``max_gear = 0``) equal to the average bandwidth
  its class reserved in the first run: the same bill.

It prints per tenant and mode the PUT latency p50/p99, the throughput, the requests
refused (503 SlowDown) and the bill (reserved MB and AGBs); ``--out DIR`` saves the gears
over time as CSV, and as PNG when matplotlib is installed. Each mode lasts
``--duration`` seconds (default 45: the whole run stays under two minutes).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from gateway.cost.calibrate import CalibrationFailed, GatewayClient, wait_quiet
from loadtests.bench.server import squall_credentials, squall_server

MB = 1_000_000
TENANTS = ("bursty", "steady")


@dataclass(frozen=True, slots=True)
class Shape:
    duration_s: float = 45.0
    on_s: float = 3.0
    off_s: float = 7.0
    burst_writers: int = 4
    steady_rate: float = 3.0  # PUTs per second of the steady tenant
    object_size: int = 256 * 1024
    g0_bytes_per_s: float = 0.5 * MB
    max_gear: int = 3
    backend_bytes_per_s: float = 16 * MB
    interval_s: float = 0.5
    backend_size_gb: float = 10.0


@dataclass
class TenantResult:
    mode: str
    tenant: str
    latencies: list[float] = field(default_factory=list)
    refused: int = 0
    bytes: int = 0
    reserved_mb: float = 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _client(endpoint: str, env: dict[str, str]) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=env["SQUALL_ACCESS_KEY"],
                        aws_secret_access_key=env["SQUALL_SECRET_KEY"],
                        config=Config(retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))


def _put(client: Any, bucket: str, key: str, body: bytes, result: TenantResult,
         lock: threading.Lock) -> None:
    started = time.perf_counter()
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "SlowDown":
            raise
        with lock:
            result.refused += 1
        return
    with lock:
        result.latencies.append(time.perf_counter() - started)
        result.bytes += len(body)


def _run_tenants(endpoint: str, env: dict[str, str], shape: Shape, buckets: dict[str, str],
                 results: dict[str, TenantResult], sampler: Any) -> None:
    body = os.urandom(shape.object_size)
    lock = threading.Lock()
    start = time.monotonic()
    end = start + shape.duration_s

    def bursty(writer: int) -> None:
        client, n = _client(endpoint, env), 0
        period = shape.on_s + shape.off_s
        while (now := time.monotonic()) < end:
            phase = (now - start) % period
            if phase >= shape.on_s:
                time.sleep(min(period - phase, end - now))
                continue
            _put(client, buckets["bursty"], f"w{writer}/{n}", body, results["bursty"], lock)
            n += 1

    def steady() -> None:
        client, n = _client(endpoint, env), 0
        while (due := start + n / shape.steady_rate) < end:
            time.sleep(max(0.0, due - time.monotonic()))
            _put(client, buckets["steady"], f"s/{n}", body, results["steady"], lock)
            n += 1

    threads = [threading.Thread(target=bursty, args=(w,)) for w in range(shape.burst_writers)]
    threads.append(threading.Thread(target=steady))
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        sampler(time.monotonic() - start)
        time.sleep(0.25)
    for t in threads:
        t.join()


def run(shape: Shape, work: Path, out: Path | None = None) -> list[TenantResult]:
    """Both modes against one gateway; returns four results (mode x tenant)."""
    env = squall_credentials("QOS")
    config = work / "qos.toml"
    work.mkdir(parents=True, exist_ok=True)
    config.write_text(f"[qos]\ninterval = {shape.interval_s}\nmax_wait = 5.0\n")
    args = ["--config", str(config), "--backend-bandwidth", f"{shape.backend_bytes_per_s:.0f}",
            "--cost-backend-size-gb", f"{shape.backend_size_gb:g}"]
    results: list[TenantResult] = []
    trace: list[dict[str, Any]] = []
    with squall_server("qos", args, work, env) as server:
        gw = GatewayClient(server.endpoint, Credentials(env["SQUALL_ACCESS_KEY"],
                                                        env["SQUALL_SECRET_KEY"]))
        s3 = _client(server.endpoint, env)
        caps = {t: shape.g0_bytes_per_s for t in TENANTS}
        for mode in ("g-states", "static"):
            buckets = {t: f"{mode}-{t}" for t in TENANTS}
            for tenant, bucket in buckets.items():
                s3.create_bucket(Bucket=bucket)
                gw.request("PUT", "/_squall/qos", params={
                    "bucket": bucket, "g0_bandwidth": f"{caps[tenant]:.0f}",
                    "max_gear": str(shape.max_gear if mode == "g-states" else 0)})
            mode_results = {t: TenantResult(mode, t) for t in TENANTS}

            def sample(at: float, mode: str = mode, buckets: dict[str, str] = buckets) -> None:
                qos = (gw.status().get("qos") or {}).get("buckets") or {}
                trace.append({"mode": mode, "t": round(at, 2), **{
                    t: qos.get(b, {}).get("gear", 0) for t, b in buckets.items()}})

            _run_tenants(server.endpoint, env, shape, buckets, mode_results, sample)
            qos = (gw.status().get("qos") or {}).get("buckets") or {}
            for tenant, bucket in buckets.items():
                cls = qos[bucket]
                reserved = cls["gear_seconds"] * caps[tenant] / MB
                mode_results[tenant].reserved_mb = reserved
                # The static run gets the bandwidth this run reserved on average.
                caps[tenant] = reserved * MB / max(sum(cls["seconds_at_gear"]), 1e-9)
                gw.request("DELETE", "/_squall/qos", params={"bucket": bucket})
            results += mode_results.values()
            wait_quiet(gw, timeout_s=120.0)
    if out is not None:
        _save_trace(trace, out)
    return results


def _save_trace(trace: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "qos-gears.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["mode", "t", *TENANTS])
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
    for tenant in TENANTS:
        points = [(p["t"], p[tenant]) for p in trace if p["mode"] == "g-states"]
        ax.step([t for t, _ in points], [g for _, g in points], where="post", label=tenant)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("gear n (cap = 2^n x G0)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "qos-gears.png", dpi=120)
    plt.close(fig)


def table(results: Sequence[TenantResult], shape: Shape) -> str:
    rows = [("| mode | tenant | PUTs | p50 ms | p99 ms | MB/s | refused | reserved MB | "
             "bill AGBs |"), "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        rows.append(f"| {r.mode} | {r.tenant} | {len(r.latencies)} | "
                    f"{1000 * r.percentile(0.5):.0f} | {1000 * r.percentile(0.99):.0f} | "
                    f"{r.bytes / MB / shape.duration_s:.2f} | {r.refused} | "
                    f"{r.reserved_mb:.1f} | {r.reserved_mb * shape.backend_size_gb:.0f} |")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    d = Shape()
    p = argparse.ArgumentParser(prog="python -m loadtests.bench.qos", description=__doc__)
    p.add_argument("--duration", type=float, default=d.duration_s, help="seconds per mode")
    p.add_argument("--on", type=float, default=d.on_s, help="burst length, s")
    p.add_argument("--off", type=float, default=d.off_s, help="pause between bursts, s")
    p.add_argument("--burst-writers", type=int, default=d.burst_writers)
    p.add_argument("--steady-rate", type=float, default=d.steady_rate, help="PUTs/s")
    p.add_argument("--object-size", type=int, default=d.object_size, help="bytes")
    p.add_argument("--g0", type=float, default=d.g0_bytes_per_s, help="G0 bytes/s")
    p.add_argument("--max-gear", type=int, default=d.max_gear)
    p.add_argument("--backend-bandwidth", type=float, default=d.backend_bytes_per_s,
                   help="bytes/s")
    p.add_argument("--interval", type=float, default=d.interval_s, help="tuning period, s")
    p.add_argument("--out", type=Path, help="directory for qos-gears.csv/.png")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    a = p.parse_args(argv)
    shape = Shape(duration_s=a.duration, on_s=a.on, off_s=a.off,
                  burst_writers=a.burst_writers, steady_rate=a.steady_rate,
                  object_size=a.object_size, g0_bytes_per_s=a.g0, max_gear=a.max_gear,
                  backend_bytes_per_s=a.backend_bandwidth, interval_s=a.interval)
    with tempfile.TemporaryDirectory(prefix="squall-qos-bench-") as tmp:
        try:
            results = run(shape, Path(tmp), a.out)
        except (httpx.HTTPError, ClientError, CalibrationFailed, RuntimeError) as exc:
            print(f"qos benchmark: {exc}", file=sys.stderr)
            return 1
    if a.json:
        print(json.dumps([asdict(r) | {"p50_s": r.percentile(0.5), "p99_s": r.percentile(0.99)}
                          for r in results], indent=2))
    else:
        print(table(results, shape))
    return 0


if __name__ == "__main__":
    sys.exit(main())
