"""``squall cluster add|remove URL``: change the members of a running cluster live.

Talks to the signed admin API ``POST /_squall/cluster/members`` of one member
(``--endpoint``) with the admin's S3 credentials (``SQUALL_ACCESS_KEY``/
``SQUALL_SECRET_KEY`` or ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``); that member
spreads the change to the others (docs/cluster.md, "Live membership"). A malformed URL
exits 2 before anything is sent; a refusal or an unreachable member exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys

import httpx

from gateway.auth.client import admin_request, refusal_detail
from gateway.cluster.ring import normalize_url
from gateway.cost.calibrate import credentials_from_env

NAME = "squall cluster"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    c = sub.add_parser("cluster", help="add or remove cluster members live",
                       description="Add a member (started with --join) to a running "
                                   "cluster, or remove one, without restarting the others "
                                   "(docs/cluster.md, \"Live membership\").")
    verbs = c.add_subparsers(dest="cluster_command", required=True)
    removal = "remove the member at URL (its unflushed writes are handed off first)"
    for verb, text in (("add", "add the member at URL"), ("remove", removal)):
        p = verbs.add_parser(verb, help=text)
        p.add_argument("url", help="the member's base URL, as in --peers (http://HOST:PORT)")
        p.add_argument("--endpoint", default="http://127.0.0.1:9000",
                       help="a current member's URL")
        p.add_argument("--region", default="us-east-1")
        p.add_argument("--timeout", type=float, default=600.0,
                       help="seconds to wait for the hand-off (default 600)")
        if verb == "remove":
            p.add_argument("--force", action="store_true",
                           help="remove a member that is down even without mirror copies "
                                "(--dirty-replicas 1): its unflushed writes are lost")


def run(args: argparse.Namespace) -> int:
    try:
        url = normalize_url(args.url)
        response = admin_request(args.endpoint, "/_squall/cluster/members",
                                 credentials_from_env(), method="POST",
                                 params={"action": args.cluster_command, "url": url,
                                         **({"force": "true"} if getattr(args, "force", False)
                                            else {})},
                                 region=args.region, timeout=args.timeout)
    except ValueError as exc:
        print(f"{NAME}: {exc}", file=sys.stderr)
        return 2
    except httpx.HTTPError as exc:
        print(f"{NAME}: cannot reach {args.endpoint}: {exc}", file=sys.stderr)
        return 1
    if response.status_code >= 300:
        print(f"{NAME}: {refusal_detail(response)}", file=sys.stderr)
        return 1
    view = response.json()
    print(json.dumps(view) if view.get("unconfirmed") else
          f"membership {view['version']}: {', '.join(view['members'])}")
    return 0
