"""``squall user add|list|remove|limit``: the gateway's users (docs/security.md).

Against a running gateway (``--endpoint``, the default) through the admin API
``/_squall/users``, signed with the admin's key pair (``SQUALL_ACCESS_KEY``/
``SQUALL_SECRET_KEY`` or ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``); or on the
files (``--data-dir``), with the gateway stopped or running (a running one sees the
change within a second). Bad input exits 2 with a one-line message; a refusal or an
unreachable gateway exits 1 (:mod:`gateway.client.failures`).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from gateway.auth.credentials import load_or_generate
from gateway.auth.users import (
    USERS_FILE,
    User,
    UserDirectory,
    UserFile,
    UserLimits,
    admin_user,
    new_user,
)
from gateway.auth.users_api import bandwidth_of
from gateway.client.credentials import credentials_from_env
from gateway.client.failures import BadAnswer, exit_status
from gateway.client.signing import admin_call
from gateway.client.tls import endpoint_context
from gateway.commands.options import add_endpoint_option, add_gateway_options

NAME = "squall user"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    u = sub.add_parser("user", help="add, list or remove users (key pairs)",
                       description="Manage the gateway's users: each has a key pair and a "
                                   "canonical id. Through a running gateway's admin API "
                                   "(--endpoint, signed with the admin's keys) or on the "
                                   "data directory (--data-dir).")
    verbs = u.add_subparsers(dest="user_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        where = p.add_mutually_exclusive_group()
        add_endpoint_option(where)
        where.add_argument("--data-dir", type=Path,
                           help="change the data directory's users file instead")
        add_gateway_options(p, endpoint=False)
        p.add_argument("--json", action="store_true", help="print JSON")

    a = verbs.add_parser("add", help="add a user; prints its access key and secret once")
    a.add_argument("name")
    common(a)
    ls = verbs.add_parser("list", help="names, access keys and canonical ids (no secrets)")
    common(ls)
    r = verbs.add_parser("remove", help="remove a user; its key is refused at once")
    r.add_argument("name")
    common(r)
    lim = verbs.add_parser("limit", help="give a user its own fair-share limits (those not "
                                         "given: the gateway's user_max_* settings; 0: none)")
    lim.add_argument("name")
    lim.add_argument("--max-requests", type=int, default=None, metavar="N",
                     help="requests in flight always admitted, per process")
    lim.add_argument("--max-rate", type=float, default=None, metavar="N",
                     help="requests per second, per process")
    lim.add_argument("--max-bandwidth", default=None, metavar="RATE",
                     help="body bytes per second, per process (e.g. 50MiB/s)")
    common(lim)


def run(args: argparse.Namespace) -> int:
    return exit_status(NAME, lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    _print(args, _offline(args) if args.data_dir is not None else _online(args))
    return 0


def _limits(args: argparse.Namespace) -> UserLimits:
    return UserLimits(max_requests=args.max_requests, max_rate=args.max_rate,
                      max_bandwidth=bandwidth_of(args.max_bandwidth))


def _offline(args: argparse.Namespace) -> dict[str, Any]:
    file = UserFile(args.data_dir / USERS_FILE)
    if args.user_command == "limit":
        return {"limited": file.set_limits(args.name, _limits(args)).public()}
    if args.user_command == "add":
        user = new_user(args.name)
        file.add(user, reserved=_admin_keys(args.data_dir))
        return {"user": {**user.public(), "secret_key": user.secret_key}}
    if args.user_command == "remove":
        return {"removed": file.remove(args.name).public()}
    admin = _admin(args.data_dir)
    if admin is None:
        return {"users": [u.public() for u in sorted(file.read(), key=lambda u: u.name)]}
    return {"users": [u.public() for u in UserDirectory(admin, file).users()]}


def _admin(data_dir: Path) -> User | None:
    """The admin of the gateway on ``data_dir`` as far as known here, else None."""
    creds = load_or_generate(data_dir, os.environ.get("SQUALL_ACCESS_KEY"),
                             os.environ.get("SQUALL_SECRET_KEY"))
    return None if creds.generated else admin_user(creds)


def _admin_keys(data_dir: Path) -> frozenset[str]:
    admin = _admin(data_dir)
    return frozenset() if admin is None else frozenset({admin.access_key})


def _online(args: argparse.Namespace) -> dict[str, Any]:
    if args.user_command == "limit":
        _limits(args)  # checked here: bad input exits 2 before anything is sent
        params: dict[str, str] = {"name": args.name, **{
            k: str(v) for k, v in (("max_requests", args.max_requests),
                                   ("max_rate", args.max_rate),
                                   ("max_bandwidth", args.max_bandwidth)) if v is not None}}
        method = "PUT"
    else:
        method, params = {"add": ("POST", {"name": getattr(args, "name", "")}),
                          "remove": ("DELETE", {"name": getattr(args, "name", "")}),
                          "list": ("GET", {})}[args.user_command]
    doc = admin_call(args.endpoint, "/_squall/users", credentials_from_env(), method=method,
                     params=params, region=args.region, verify=endpoint_context(args.ca_bundle))
    if not isinstance(doc, dict):
        raise BadAnswer(f"{args.endpoint} answered an unknown document")
    return doc


def _print(args: argparse.Namespace, result: dict[str, Any]) -> None:
    if "limited" in result or (args.user_command == "limit" and "user" in result):
        u = result.get("limited") or result["user"]
        if args.json:
            print(json.dumps(u, indent=1))
        else:
            own = ", ".join(f"{k}={v:g}" for k, v in u.get("limits", {}).items())
            print(f"user {u['name']}: {own or 'the gateway settings'}")
        return
    if args.json:
        print(json.dumps(result.get("user") or result.get("removed") or result, indent=1))
        return
    if "user" in result:
        u = result["user"]
        print(f"user:         {u['name']}\ncanonical id: {u['canonical_id']}\n"
              f"access key:   {u['access_key']}\nsecret key:   {u['secret_key']}\n"
              "(the secret is shown only now)")
    elif "removed" in result:
        print(f"removed user {result['removed']['name']}")
    else:
        rows = result["users"]
        width = max([len(u["name"]) for u in rows] + [4])
        print(f"{'NAME':<{width}}  {'ACCESS KEY':<20}  CANONICAL ID")
        for u in rows:
            mark = " (admin)" if u.get("admin") else ""
            print(f"{u['name']:<{width}}  {u['access_key']:<20}  {u['canonical_id']}{mark}")
