"""``squall cost``, ``squall calibrate``, ``squall predict`` and ``squall advise``.

``cost`` reads the ``cost`` object of a running gateway's ``/_squall/status``;
``calibrate`` measures a running gateway into a calibration file; ``predict`` and
``advise`` work offline from that file (docs/cost-model.md).
Bad input exits with status 2 and a one-line message; an unreachable gateway with 1
(:mod:`gateway.client.failures`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from backends.core.units import parse_size
from gateway.client.credentials import FROM as CREDENTIALS_FROM
from gateway.client.credentials import credentials_from_env
from gateway.client.failures import BadAnswer, ClientFailure, exit_status
from gateway.client.tls import endpoint_context
from gateway.commands.options import add_gateway_options
from gateway.cost.calibration import CalibrationError, load_calibration, select
from gateway.cost.meter import format_report, write_csv
from gateway.cost.predict import (
    Advice,
    Application,
    Prediction,
    advise,
    experience_schedule,
    predict,
    predict_schedule,
)

COMMANDS = ("cost", "calibrate", "predict", "advise")


def _number(kind: str, minimum: float, strict: bool) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or value < minimum or (strict and value == minimum):
            raise argparse.ArgumentTypeError(
                f"{kind} must be {'>' if strict else '>='} {minimum:g}, got {text}")
        return value
    return parse


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {text}")
        return value
    return parse


_count = whole_number(0)


_size = _number("a size in GB", 0, strict=False)
_positive = _number("the value", 0, strict=True)


def _application_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration", type=Path, required=True,
                   help="calibration JSON file (format: docs/cost-model.md)")
    p.add_argument("--configuration", action="append", default=[], metavar="NAME",
                   help="only this configuration of the file (repeatable; default all)")
    a = p.add_argument_group("application (seed III-C)")
    a.add_argument("--nodes", type=_count, default=1, help="n: nodes writing checkpoints")
    a.add_argument("--iterations", type=_count, required=True, help="I: iterations")
    a.add_argument("--iteration-time", type=_size, required=True,
                   help="I_t: compute seconds per iteration")
    a.add_argument("--checkpoints", type=_count, required=True, help="K: checkpoints per node")
    a.add_argument("--checkpoint-size", type=_positive, required=True,
                   help="S_c: checkpoint size per node, GB")
    a.add_argument("--init-size", type=_size, default=0.0,
                   help="S_i: initial dump per node, GB (default 0: none)")
    a.add_argument("--init-cache-size", type=_size,
                   help="M(S_i): cache size during the initial dump, GB "
                        "(default: the same as for checkpoints)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    c = sub.add_parser("cost", help="report a gateway's adjusted storage accumulation (AGBs)",
                       description="Print the cost meter of a running gateway "
                                   "(C(t) = B_b*N*t + B_c*integral M(x)dx, in AGBs).")
    add_gateway_options(c, region=False)
    c.add_argument("--csv", type=Path, help="also write the recent series as CSV")
    c.add_argument("--plot", type=Path, help="also plot it as PNG (needs matplotlib)")
    c.add_argument("--json", action="store_true", help="print the cost object as JSON")

    k = sub.add_parser("calibrate", help="measure B(x) and D(x) of a running gateway",
                       description="Write datasets of the given sizes with parallel writers "
                                   "against a running gateway, once per cache size M (an "
                                   "elastic gateway) or once (a static one), and save the "
                                   "sustained throughput B_M(x) and the time the cache "
                                   "stayed attached D_M(x) as a calibration file. "
                                   f"Credentials as for S3 clients: {CREDENTIALS_FROM}.")
    add_gateway_options(k)
    k.add_argument("--sizes", nargs="+", required=True, type=_bytes, metavar="SIZE",
                   help="data sizes x, e.g. 128MB 256MB")
    k.add_argument("--cache-sizes", nargs="+", default=[], type=_bytes, metavar="SIZE",
                   help="cache sizes M (elastic gateways), e.g. 128MB 256MB")
    k.add_argument("--out", type=Path, required=True, help="calibration file to write")
    k.add_argument("--append", action="store_true",
                   help="add this configuration to --out (replacing one of the same name)")
    k.add_argument("--name", help="configuration name (default: BACKEND-elastic|static)")
    k.add_argument("--writers", type=_count, default=4, help="parallel writers (default 4)")
    k.add_argument("--object-size", type=_bytes, default=8 << 20,
                   help="size of each object written (default 8MiB)")
    k.add_argument("--bucket", default="squall-calibration", help="bucket to write into")
    k.add_argument("--providers", type=_count, default=1, help="backend providers (record)")
    k.add_argument("--backend-bandwidth-mb-s", type=_positive,
                   help="B_b (default: the gateway's backend throttle)")
    k.add_argument("--backend-size-gb", type=_size,
                   help="N (default: the gateway's cost meter setting)")
    k.add_argument("--cache-bandwidth-mb-s", type=_size,
                   help="B_c (default: the gateway's cost meter setting)")
    k.add_argument("--quiet-timeout", type=_positive, default=600.0,
                   help="seconds to wait for the gateway to drain between points")

    p = sub.add_parser("predict", help="predict completion time and cost for cache sizes",
                       description="Predict T = I*I_t + K*S_c/B(S_c) + P and C_a for the "
                                   "given cache sizes from a calibration file (P: the "
                                   "compute lost while a cache drains, 0 unless "
                                   "calibrated).")
    _application_args(p)
    p.add_argument("--cache-size", type=_size, nargs="+", metavar="GB",
                   help="M(S_c): cache size(s) during checkpoints, GB")
    p.add_argument("--experience", action="store_true",
                   help="instead of --cache-size: size each checkpoint's cache as the "
                        "elastic controller does (what the previous burst used: S_i for "
                        "the first checkpoint, then S_c); --init-cache-size is M(S_i)")
    p.add_argument("--deadline", type=_positive, help="T_max in seconds (marks misses)")

    a = sub.add_parser("advise", help="recommend the cache size with minimal cost under a "
                                      "deadline and rank configurations",
                       description="Evaluate every candidate cache size, recommend the one "
                                   "with minimal C_a among those with T <= T_max, and rank "
                                   "configurations by performance/cost 1/(T*C_a).")
    _application_args(a)
    a.add_argument("--deadline", type=_positive, help="T_max in seconds (default: none)")
    a.add_argument("--cache-size", type=_size, nargs="+", metavar="GB",
                   help="candidate sizes, GB (default: the calibrated ones)")
    a.add_argument("--plot", type=Path, help="also plot T and C_a per size as PNG")


def run(args: argparse.Namespace) -> int:
    main = {"cost": _cost, "predict": _predict, "calibrate": _calibrate}.get(args.command,
                                                                            _advise)
    return exit_status(f"squall {args.command}", lambda: _plotting(main, args))


def _plotting(main: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    from gateway.cost.plot import PlotUnavailable

    try:
        return main(args)
    except PlotUnavailable as exc:  # matplotlib is missing: the rest was done
        raise ClientFailure(str(exc)) from exc


# -- cost --------------------------------------------------------------------------------
def _cost(args: argparse.Namespace) -> int:
    import httpx

    from gateway.client.failures import json_of, reaching
    from gateway.client.signing import status_headers

    url = f"{args.endpoint.rstrip('/')}/_squall/status"
    with reaching(args.endpoint):
        response = httpx.get(url, headers=status_headers(url), timeout=10.0,
                             verify=endpoint_context(args.ca_bundle))
    status = json_of(response)
    cost = status.get("cost") if isinstance(status, dict) else None
    if not isinstance(cost, dict) or "agbs" not in cost:
        raise BadAnswer("this gateway reports no cost meter (no cache tier, or an older "
                        "version)")
    print(json.dumps(cost, indent=2) if args.json else format_report(cost))
    for line in ([] if args.json else missing_settings(cost)):
        print(line)
    qos = status.get("qos")
    if not args.json and isinstance(qos, dict) and (qos.get("buckets") or qos.get("users")):
        from gateway.commands.qos import format_buckets, labelled_classes

        print("QoS gears (docs/qos.md):")
        print(format_buckets(labelled_classes(qos)))
    series = cost.get("series") or {}
    if args.csv:
        write_csv(args.csv, series)
    if args.plot:
        from gateway.cost.plot import plot_series

        plot_series(series, args.plot)
    return 0


def missing_settings(cost: dict[str, Any]) -> list[str]:
    """What the gateway lacks for a term of C(t) that stays 0 (docs/cost-model.md)."""
    lacking = []
    if not float(cost.get("backend_bandwidth_mb_s") or 0):
        lacking.append("--backend-bandwidth (B_b)")
    if not float(cost.get("backend_size_gb") or 0):
        lacking.append("--cost-backend-size-gb (N)")
    if not float(cost.get("cache_bandwidth_mb_s") or 0):
        lacking.append("--cost-cache-bandwidth-mb-s (B_c)")
    if not lacking:
        return []
    return [(f"  missing settings        : {', '.join(lacking)} on `squall serve` "
             "(or SQUALL_*): the terms using them count 0 AGBs; see docs/cost-model.md")]


# -- calibrate ---------------------------------------------------------------------------
def _bytes(text: str) -> int:
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _calibrate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from gateway.cost import calibrate as cal

    if args.writers < 1:
        raise ValueError("--writers must be >= 1")
    gw = cal.GatewayClient(args.endpoint, credentials_from_env(), args.region,
                           verify=endpoint_context(args.ca_bundle))
    plan = cal.Plan(sizes=args.sizes, cache_sizes=args.cache_sizes, writers=args.writers,
                    object_size=args.object_size, bucket=args.bucket,
                    quiet_timeout_s=args.quiet_timeout)
    status = gw.status()
    runs = len(args.cache_sizes) if cal.elastic(status) else 1
    with tqdm(total=runs * sum(args.sizes), unit="B", unit_scale=True,
              desc="calibrating", file=sys.stderr) as bar:
        points = cal.calibrate(gw, plan, progress=bar)
    status = gw.status()
    name = args.name or (f"{(status.get('backend') or {}).get('kind', 'posix')}-"
                         f"{'elastic' if cal.elastic(status) else 'static'}")
    config = cal.configuration(status, points, name=name, providers=max(1, args.providers),
                               backend_bandwidth_mb_s=args.backend_bandwidth_mb_s,
                               backend_size_gb=args.backend_size_gb,
                               cache_bandwidth_mb_s=args.cache_bandwidth_mb_s)
    cal.save(args.out, config, append=args.append)
    print(f"{'M GB':>8} {'x GB':>8} {'B MB/s':>8} {'D s':>8}")
    for p in points:
        print(f"{p.cache_gb:>8g} {p.dataset_gb:>8g} {p.throughput_mb_s:>8.1f} "
              f"{p.attach_s:>8.1f}")
    print(f"saved configuration {name!r} to {args.out}")
    return 0


# -- predict / advise --------------------------------------------------------------------
def _application(args: argparse.Namespace) -> Application:
    return Application(nodes=args.nodes, iterations=args.iterations,
                       iteration_s=args.iteration_time, checkpoints=args.checkpoints,
                       checkpoint_gb=args.checkpoint_size, init_gb=args.init_size,
                       init_cache_gb=args.init_cache_size)


HEADER = (f"{'configuration':<20} {'M GB':>7} {'B MB/s':>8} {'D s':>8} {'T s':>10} "
          f"{'C_a AGBs':>14} {'perf/cost':>10}  deadline")


def _row(p: Prediction, mark: str = "") -> str:
    return (f"{p.configuration:<20.20} {p.cache_gb:>7g} {p.throughput_mb_s:>8.1f} "
            f"{p.attach_s:>8.1f} {p.time_s:>10.1f} {p.cost_agbs:>14,.0f} "
            f"{p.perf_cost_ratio:>10.3e}  {'met' if p.meets_deadline else 'MISSED'}{mark}")


def _predict(args: argparse.Namespace) -> int:
    app = _application(args)
    configs = select(load_calibration(args.calibration), args.configuration)
    if args.experience == bool(args.cache_size):
        raise ValueError("give either --cache-size or --experience")
    if args.experience:
        if args.init_cache_size is None:
            raise ValueError("--experience needs --init-cache-size (the first volume)")
        schedule = experience_schedule(app, args.init_cache_size)
        rows = [predict_schedule(app, c, schedule, args.deadline) for c in configs]
    else:
        rows = [predict(app, c, m, args.deadline) for c in configs for m in args.cache_size]
    if args.json:
        print(json.dumps([asdict(p) for p in rows], indent=2))
    else:
        print(HEADER)
        for p in rows:
            print(_row(p))
    return 0


def _advise(args: argparse.Namespace) -> int:
    app = _application(args)
    configs = select(load_calibration(args.calibration), args.configuration)
    advice = advise(app, configs, deadline_s=args.deadline, cache_sizes=args.cache_size)
    if not advice.candidates:
        raise CalibrationError("no candidate could be evaluated: "
                               + "; ".join(advice.skipped))
    if args.json:
        print(json.dumps(_advice_json(advice), indent=2))
    else:
        _print_advice(advice, args.deadline)
    if args.plot:
        from gateway.cost.plot import plot_candidates

        plot_candidates([(p.configuration, p.cache_gb, p.time_s, p.cost_agbs)
                         for p in advice.candidates], args.plot, args.deadline)
    return 0 if advice.recommended is not None else 3


def _advice_json(advice: Advice) -> dict[str, Any]:
    return {"candidates": [asdict(p) for p in advice.candidates],
            "recommended": asdict(advice.recommended) if advice.recommended else None,
            "ranking": [asdict(p) | {"perf_cost_ratio": p.perf_cost_ratio}
                        for p in advice.ranking],
            "skipped": advice.skipped}


def _print_advice(advice: Advice, deadline: float | None) -> None:
    print("candidates (* = recommended: minimal C_a"
          + (f" with T <= {deadline:g} s)" if deadline else ")"))
    print(HEADER)
    for p in advice.candidates:
        print(_row(p, "  *" if p == advice.recommended else ""))
    print()
    print("configurations by performance/cost 1/(T*C_a), best first (each at its "
          "cheapest cache size meeting the deadline)")
    for rank, p in enumerate(advice.ranking, 1):
        print(f"{rank:>3}. {p.configuration}: M={p.cache_gb:g} GB, T={p.time_s:.1f} s, "
              f"C_a={p.cost_agbs:,.0f} AGBs, perf/cost={p.perf_cost_ratio:.3e}")
    for name, best in advice.best_per_configuration.items():
        if best is None:
            print(f"  -  {name}: no cache size meets the deadline")
    for note in advice.skipped:
        print(f"skipped: {note}")
    if advice.recommended is None:
        print("no configuration meets the deadline", file=sys.stderr)
    else:
        r = advice.recommended
        print(f"recommended: {r.configuration} with M(S_c) = {r.cache_gb:g} GB "
              f"(T = {r.time_s:.1f} s, C_a = {r.cost_agbs:,.0f} AGBs)")


def main(argv: list[str] | None = None) -> int:
    """Run these subcommands alone (``python -m gateway.commands.cost advise ...``)."""
    parser = argparse.ArgumentParser(prog="squall")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
