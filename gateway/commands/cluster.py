"""``squall cluster``: the cluster as etcd holds it, and the two things an operator does.

* ``status --coordinator etcd://...``: etcd's revision (from its answer's header) and the
  ring's (its newest change: a registration's, or what a member synced to after a leave),
  every member (live or held), its lease and the time it has left, the newest membership
  revision it has finished handing keys over for, and which members are still handing
  over (their keys move only once they are done).
* ``leave --endpoint URL``: the member at URL hands its unflushed writes over and ends its
  lease (what a Kubernetes pod's preStop hook runs); signed with the admin's credentials.
* ``forget NAME --coordinator ...``: a held member that will never come back stops holding
  its keys: its unflushed writes are given up (``--lose-unflushed-writes`` says so).

Members join by starting (``squall serve --coordinator ...``) and leave by stopping; there
is nothing else to run. A bad argument exits 2, a refusal or an unreachable service 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from gateway.client.credentials import credentials_from_env
from gateway.client.failures import ClientFailure, exit_status
from gateway.client.signing import admin_call
from gateway.client.tls import endpoint_context
from gateway.cluster.coordinator.client import CoordinatorUnavailable, EtcdClient
from gateway.cluster.coordinator.keys import HELD, MEMBERS, SYNCED, Layout, Registration
from gateway.cluster.coordinator.settings import (
    DEFAULT_PREFIX,
    CoordinatorSettings,
    coordinator_settings,
)
from gateway.cluster.view import member_id
from gateway.commands.options import add_gateway_options

NAME = "squall cluster"
T = TypeVar("T")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    c = sub.add_parser("cluster", help="the cluster's members as etcd holds them",
                       description="Show the members of a cluster coordinated by etcd, make "
                                   "a member leave, or forget a member that will not come "
                                   "back (docs/cluster.md).")
    verbs = c.add_subparsers(dest="cluster_command", required=True)
    status = verbs.add_parser("status", help="members, leases, revisions, hand-overs")
    _coordinator_flags(status)
    status.add_argument("--json", action="store_true", help="print JSON")
    leave = verbs.add_parser("leave", help="make the member at --endpoint leave the cluster")
    add_gateway_options(leave, endpoint_help="the member's URL")
    leave.add_argument("--timeout", type=float, default=300.0,
                       help="seconds to wait for the hand-over (default 300)")
    forget = verbs.add_parser("forget", help="give up a held member that will not return")
    forget.add_argument("member", help="the member's name (its URL, as status shows it)")
    _coordinator_flags(forget)
    forget.add_argument("--lose-unflushed-writes", action="store_true",
                        help="required: the member's unflushed writes are lost")


def _coordinator_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--coordinator", required=True,
                        help="etcd endpoints, as given to squall serve")
    parser.add_argument("--coordinator-prefix", default=DEFAULT_PREFIX)
    for name in ("etcd-ca", "etcd-cert", "etcd-key"):
        parser.add_argument(f"--{name}", type=Path)
    parser.add_argument("--etcd-user")
    parser.add_argument("--etcd-password")


def _settings(args: argparse.Namespace) -> CoordinatorSettings:
    return coordinator_settings(args.coordinator, prefix=args.coordinator_prefix,
                                ca=args.etcd_ca, cert=args.etcd_cert, key=args.etcd_key,
                                user=args.etcd_user, password=args.etcd_password)


async def read_state(settings: CoordinatorSettings) -> dict[str, Any]:
    """The cluster's state in etcd: members with their leases, syncs and holds."""
    client = EtcdClient(settings)
    layout = Layout(settings.prefix)
    try:
        found = await client.call(lambda c: c.get_prefix(layout.prefix))
        members: dict[str, dict[str, Any]] = {}
        synced: dict[str, int] = {}
        newest = 0
        for kv in found:
            kind = layout.kind(bytes(kv.key))
            if kind is None:
                continue
            what, member = kind
            if what == SYNCED:
                synced[member] = int(kv.value)
                continue
            newest = max(newest, int(kv.mod_revision))
            record = Registration.decode(bytes(kv.value))
            entry = members.setdefault(member, {"name": record.member.name,
                                                "url": record.host, "worker": record.worker,
                                                "workers": record.workers, "live": False,
                                                "held": False, "lease": None,
                                                "ttl_s": None, "started": record.started})
            if what == MEMBERS:
                lease = int(kv.lease)
                entry.update(live=True, lease=f"{lease:x}",
                             ttl_s=await _ttl(client, lease))
            elif what == HELD:
                entry["held"] = True
        # A member leaving deletes its key: the ring's newest change is then no key's
        # revision, but it is what the members sync to once they have handed keys over.
        newest = max([newest, *synced.values()])
        for member, entry in members.items():
            entry["synced"] = synced.get(member, 0)
            entry["handing_over"] = entry["live"] and entry["synced"] < newest
        return {"coordinator": settings.url, "prefix": settings.prefix,
                "revision": int(found.header.revision), "membership_revision": newest,
                "members": sorted(members.values(), key=lambda m: m["name"])}
    finally:
        await client.aclose()


async def _ttl(client: EtcdClient, lease: int) -> int:
    info = await client.call(lambda c: c.get_lease_info(lease, keys=False))
    return int(info.TTL)


async def _forget(settings: CoordinatorSettings, name: str) -> bool:
    client = EtcdClient(settings)
    layout = Layout(settings.prefix)
    try:
        live = await client.call(lambda c: c.get(layout.member(name)))
        if live is not None:
            raise ValueError(f"{name} is a live member (its lease is alive): stop it, or "
                             "let it leave (squall cluster leave)")
        deleted = await client.call(lambda c: c.delete(layout.held(name)))
        await client.call(lambda c: c.delete(layout.synced(name)))
        return bool(deleted)
    finally:
        await client.aclose()


def _print_status(state: dict[str, Any]) -> None:
    print(f"coordinator {state['coordinator']} (prefix {state['prefix']}) at etcd "
          f"revision {state['revision']}, membership revision "
          f"{state['membership_revision']}")
    if not state["members"]:
        print("no member")
    for m in state["members"]:
        kind = "live" if m["live"] else "held (down)"
        if m["live"] and m["held"]:
            kind = "live, held"
        lease = f"lease {m['lease']} ({m['ttl_s']} s left)" if m["live"] else "no lease"
        handing = ", handing keys over" if m["handing_over"] else ""
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(m["started"]))
        print(f"  {m['name']}: {kind}, {lease}, synced to {m['synced']}{handing}, "
              f"started {started}")


def run(args: argparse.Namespace) -> int:
    return exit_status(NAME, lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    command = args.cluster_command
    if command == "leave":
        return _leave(args)
    settings = _settings(args)
    if command == "status":
        state = _etcd(read_state(settings))
        if args.json:
            print(json.dumps(state, indent=2))
        else:
            _print_status(state)
        return 0
    if not args.lose_unflushed_writes:
        raise ValueError("forgetting a held member gives up its unflushed writes; say so "
                         "with --lose-unflushed-writes")
    if _etcd(_forget(settings, args.member)):
        print(f"forgot {args.member} (id {member_id(args.member)}): its keys are served "
              "by the other members from now on")
    else:
        print(f"{args.member} was not held: nothing to forget")
    return 0


def _etcd(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on etcd; ClientFailure when etcd does not answer."""
    try:
        return asyncio.run(work)
    except CoordinatorUnavailable as exc:
        raise ClientFailure(str(exc)) from exc


def _leave(args: argparse.Namespace) -> int:
    answer = admin_call(args.endpoint, "/_squall/cluster/leave", credentials_from_env(),
                        method="POST", region=args.region, timeout=args.timeout,
                        verify=endpoint_context(args.ca_bundle))
    print(f"{(answer or {}).get('self')} left the cluster")
    return 0
