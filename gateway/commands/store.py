"""``squall fsck`` (check a blobseer_like store, rebuild its index) and ``squall providers``
(list or add the providers of a running gateway's store)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from gateway.client.credentials import FROM as CREDENTIALS_FROM
from gateway.client.credentials import credentials_from_env
from gateway.client.failures import exit_status
from gateway.client.signing import admin_call
from gateway.client.tls import endpoint_context
from gateway.commands.options import add_gateway_options
from gateway.config.settings import BackendSpec

COMMANDS = ("fsck", "providers")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    f = sub.add_parser("fsck", help="check a blobseer_like store; rebuild its index",
                       description="Check that every chunk the store's versions refer to is "
                                   "there (and intact, with --verify-data). Run it while no "
                                   "gateway uses the store.")
    f.add_argument("--backend", required=True, help="blobseer_like:DIR1,DIR2,... as served")
    f.add_argument("--data-dir", type=Path, default=Path("squall-data"),
                   help="the gateway's data directory (holds the index; default squall-data)")
    f.add_argument("--rebuild", action="store_true",
                   help="rebuild the local index from the records on the providers")
    f.add_argument("--verify-data", action="store_true",
                   help="read every chunk and verify its checksum")
    f.add_argument("--gc", action="store_true", help="also remove unreferenced data")
    p = sub.add_parser("providers", help="list or add providers of a running store",
                       description=f"Credentials as for S3 clients: {CREDENTIALS_FROM}.")
    p.add_argument("action", choices=["list", "add"])
    p.add_argument("path", nargs="?", help="(add) the new provider directory, as the "
                                           "gateway's host sees it")
    p.add_argument("--standby", action="store_true",
                   help="(add) keep it in reserve until a write burst")
    add_gateway_options(p)


def run(args: argparse.Namespace) -> int:
    main = _fsck if args.command == "fsck" else _providers
    return exit_status(f"squall {args.command}", lambda: main(args))


def _fsck(args: argparse.Namespace) -> int:
    from backends.blobseer_like.fsck import fsck

    spec = BackendSpec.parse(args.backend)
    if spec.kind != "blobseer_like":
        raise ValueError(f"fsck checks blobseer_like stores, not {spec.kind!r}")
    report = asyncio.run(fsck(spec.args, args.data_dir, rebuild=args.rebuild,
                              verify_data=args.verify_data, collect=args.gc))
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


def _providers(args: argparse.Namespace) -> int:
    if args.action == "add" and not args.path:
        raise ValueError("add needs the new provider's directory (PATH)")
    params: dict[str, str] = {}
    if args.action == "add":
        params = {"path": args.path, **({"standby": "true"} if args.standby else {})}
    method = "POST" if args.action == "add" else "GET"
    body = admin_call(args.endpoint, "/_squall/providers", credentials_from_env(),
                      method=method, params=params, region=args.region, timeout=60,
                      verify=endpoint_context(args.ca_bundle))
    for provider in body.get("providers") or [body["provider"]]:
        print(f"{provider['id']}  {provider['state']:8}  {provider['path']}")
    return 0
