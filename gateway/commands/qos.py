"""``squall qos set|show|clear``: the performance gears of a bucket, or of a user's
requests, on a running gateway.

Talks to the signed admin API ``/_squall/qos`` with the S3 client credentials
(``SQUALL_ACCESS_KEY``/``SQUALL_SECRET_KEY`` or ``AWS_ACCESS_KEY_ID``/
``AWS_SECRET_ACCESS_KEY``). Bad input exits 2 with a one-line message before anything is
sent; a refusal by the gateway or an unreachable gateway exits 1
(:mod:`gateway.client.failures`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pydantic import ValidationError

from gateway.client.credentials import credentials_from_env
from gateway.client.failures import exit_status
from gateway.client.signing import admin_call
from gateway.client.tls import endpoint_context
from gateway.commands.options import add_gateway_options
from gateway.qos.api import validation_message
from gateway.qos.model import QosClass

NAME = "squall qos"
FLAGS = (("g0_iops", "--g0-iops"), ("max_gear", "--max-gear"), ("threshold", "--threshold"),
         ("device_threshold", "--device-threshold"), ("demote_after", "--demote-after"),
         ("credit_s", "--credit-s"))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    q = sub.add_parser("qos", help="performance gears (G-states) of buckets and users",
                       description="Set, show or clear the QoS class of a bucket (or, with "
                                   "--user, of a user's requests) on a running "
                                   "gateway: gears G_n = 2^n x G0 of bandwidth and IOPS, "
                                   "promoted at the threshold of the current cap, demoted "
                                   "below the lower gear's cap, billed per gear-second "
                                   "(docs/qos.md).")
    verbs = q.add_subparsers(dest="qos_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        add_gateway_options(p)

    def subject(p: argparse.ArgumentParser, required: bool = True) -> None:
        p.add_argument("bucket", nargs="?", help="the bucket (or give --user)")
        p.add_argument("--user", metavar="NAME",
                       help="the class of this user's requests, in every bucket")
        p.set_defaults(subject_required=required)

    s = verbs.add_parser("set", help="give a bucket or a user a QoS class")
    subject(s)
    s.add_argument("--g0-bandwidth", required=True, metavar="RATE",
                   help="bandwidth of gear 0, e.g. 10MB/s, 64MiB/s")
    s.add_argument("--g0-iops", metavar="N", help="operations/s of gear 0 (default: none)")
    s.add_argument("--max-gear", metavar="K", help="highest gear (default 3: 8 x G0)")
    s.add_argument("--threshold", metavar="F",
                   help="promote at this share of the current cap (default 0.95)")
    s.add_argument("--device-threshold", metavar="F",
                   help="promote only while the device is below this utilization "
                        "(default 0.9)")
    s.add_argument("--demote-after", metavar="K",
                   help="demote after K intervals below the lower gear (default 1)")
    s.add_argument("--credit-s", metavar="S",
                   help="no gears: a credit scheme (EBS gp2) holding S seconds of G0, "
                        "spent to burst up to the top gear's cap")
    common(s)
    w = verbs.add_parser("show", help="the classes, gears, use and gear-seconds")
    subject(w, required=False)
    w.add_argument("--json", action="store_true", help="print JSON")
    common(w)
    c = verbs.add_parser("clear", help="remove a bucket's or a user's QoS class")
    subject(c)
    common(c)


def _request(args: argparse.Namespace, method: str, params: dict[str, str]) -> Any:
    return admin_call(args.endpoint, "/_squall/qos", credentials_from_env(), method=method,
                      params=params, region=args.region,
                      verify=endpoint_context(args.ca_bundle))


def _class_params(args: argparse.Namespace) -> dict[str, str]:
    """The class as query parameters, checked here first for a clear message."""
    params = {"g0_bandwidth": args.g0_bandwidth}
    params.update({field: getattr(args, field) for field, _ in FLAGS
                   if getattr(args, field) is not None})
    try:
        QosClass.model_validate(params)
    except ValidationError as exc:
        flags = dict(FLAGS, g0_bandwidth="--g0-bandwidth")
        message = validation_message(exc)
        for field, flag in flags.items():
            message = message.replace(f"{field}:", f"{flag}:")
        raise ValueError(message) from None
    return params


def _subject(args: argparse.Namespace) -> dict[str, str]:
    """``{"bucket": B}`` or ``{"user": U}`` (empty for ``show`` of everything)."""
    if args.bucket and args.user:
        raise ValueError("give a bucket or --user, not both")
    if args.user:
        return {"user": args.user}
    if args.bucket:
        return {"bucket": args.bucket}
    if args.subject_required:
        raise ValueError("give a bucket or --user NAME")
    return {}


def run(args: argparse.Namespace) -> int:
    return exit_status(NAME, lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    subject = _subject(args)
    if args.qos_command == "set":
        answer = _request(args, "PUT", {**subject, **_class_params(args)})
    elif args.qos_command == "clear":
        answer = _request(args, "DELETE", subject)
    else:
        answer = _request(args, "GET", subject)
    label = f"user {args.user}" if args.user else args.bucket
    if args.qos_command == "clear":
        print(f"{label}: no QoS class")
    elif args.qos_command == "set":
        print(format_buckets({label: answer}))
    elif args.json:
        print(json.dumps(answer, indent=2))
    else:
        classes = labelled_classes(answer)
        print(format_buckets(classes) if classes else "no QoS classes")
    return 0


def _rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value / 1e6:.2f} MB/s" if unit == "B" else f"{value:.0f}/s"


def labelled_classes(qos: dict[str, Any]) -> dict[str, Any]:
    """The classes of a ``qos`` status object by label: buckets by name, users as
    ``user NAME``."""
    return {**(qos.get("buckets") or {}),
            **{f"user {name}": c for name, c in (qos.get("users") or {}).items()}}


def format_buckets(buckets: dict[str, Any]) -> str:
    """A table of classes by label (``qos.buckets`` of ``/_squall/status``, users as
    ``user NAME``)."""
    lines = [(f"{'class':<24} {'gear':>7} {'bw cap':>12} {'bw used':>12} "
              f"{'iops cap':>9} {'iops used':>9} {'gear-s':>10}")]
    for name, b in sorted(buckets.items()):
        lines.append(f"{name:<24.24} {b['gear']:>3}/{b['max_gear']:<3} "
                     f"{_rate(b['bandwidth_cap'], 'B'):>12} "
                     f"{_rate(b['bandwidth_used'], 'B'):>12} "
                     f"{_rate(b['iops_cap'], 'op'):>9} {_rate(b['iops_used'], 'op'):>9} "
                     f"{b['gear_seconds']:>10.1f}")
    return "\n".join(lines)
