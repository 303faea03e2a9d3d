"""The ``squall`` command line."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from gateway.extras import install_hint, missing_extra

# The modules of the subcommands besides ``serve``, with the subcommands each adds. Each
# has ``register(subparsers)`` (adding its subcommands) and ``run(args) -> int`` (running
# any of them); a new subcommand module is one more entry here. A module whose optional
# extra is not installed still gets its subcommands, which then say what to install.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "gateway.sync_cli": ("sync",),
    "gateway.fuse_mount.cli": ("mount",),
    "gateway.cost.cli": ("cost", "calibrate", "predict", "advise"),
    "gateway.store_cli": ("fsck", "providers"),
    "gateway.qos.cli": ("qos",),
    "gateway.dashboard.top": ("top",),
    "gateway.users_cli": ("user",),
}


def _serve_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("serve", help="run the S3 gateway",
                       description="Run the S3 gateway. Every option is also a SQUALL_* "
                                   "environment variable and a key of the --config file.")
    p.add_argument("--config", type=Path, help="TOML file with settings")
    p.add_argument("--listen", help="HOST:PORT to listen on (default 127.0.0.1:9000)")
    p.add_argument("--data-dir", type=Path, help="data directory (default ./squall-data)")
    p.add_argument("--backend", help="KIND:ARGS, e.g. posix:/srv/objects "
                                     "(default posix:<data-dir>/objects)")
    p.add_argument("--domain", help="serve virtual-hosted-style requests for <bucket>.DOMAIN")
    p.add_argument("--region", help="region reported to clients (default us-east-1)")
    p.add_argument("--no-sigv2", dest="sigv2", action="store_const", const=False,
                   help="refuse AWS Signature Version 2 (header and presigned URLs)")
    p.add_argument("--durability", choices=["fsync", "none"],
                   help="fsync: acknowledge writes once on stable storage (default); "
                        "none: skip fsync (faster, loses recent writes on power loss)")
    p.add_argument("--min-part-size", type=int, help="minimum multipart part size in bytes")
    c = p.add_argument_group("cache tier")
    c.add_argument("--cache-size", help="cache capacity, e.g. 1GiB (default); 0 disables it")
    c.add_argument("--cache-dir", type=Path, help="cache volume directory "
                                                  "(default <data-dir>/cache)")
    c.add_argument("--cache-mode", choices=["static", "elastic"],
                   help="static: the cache volumes are always there (default); elastic: a "
                        "volume is attached only while a write burst lasts, sized from "
                        "experience (the first one --cache-size)")
    c.add_argument("--cache-volume-root", type=Path,
                   help="elastic: where volumes are created (default <data-dir>/volumes)")
    c.add_argument("--cache-volume-bandwidth",
                   help="elastic: bandwidth cap of a volume (B_c), e.g. 64MB/s")
    c.add_argument("--cache-min-size", help="elastic: smallest volume (default 1MiB)")
    c.add_argument("--cache-max-size", help="elastic: largest volume (default no limit)")
    c.add_argument("--max-dirty-age", type=float,
                   help="seconds after which dirty data is flushed whatever the phase")
    c.add_argument("--utilization-threshold", type=float,
                   help="UT: phase 2 starts when ingest stays below UT x backend bandwidth")
    c.add_argument("--inactivity-delay", type=float,
                   help="ID: seconds ingest must stay below UT before phase 2")
    c.add_argument("--flush-concurrency", type=int, help="objects flushed at once")
    c.add_argument("--cache-admission", choices=["auto", "cache"],
                   help="auto (default): writes go past the cache when the backend takes "
                        "them as fast; cache: cache every write that fits")
    t = p.add_argument_group("backend throttle")
    t.add_argument("--backend-bandwidth", help="cap on bytes to/from the backend, e.g. 20MiB/s")
    t.add_argument("--backend-iops", type=float, help="cap on backend operations per second")
    m = p.add_argument_group("cost model (AGBs, see docs/cost-model.md)")
    m.add_argument("--cost-backend-size-gb", type=float,
                   help="N: size of the backing storage in GB")
    m.add_argument("--cost-cache-bandwidth-mb-s", type=float,
                   help="B_c: bandwidth of the cache device in MB/s")
    lc = p.add_argument_group("bucket lifecycle (see docs/s3-api.md)")
    lc.add_argument("--lifecycle-interval", type=float,
                    help="seconds between two scans enforcing lifecycle rules (default 3600)")
    lc.add_argument("--lifecycle-day-seconds", type=float,
                    help="length in seconds of a lifecycle day (default 86400, as S3); a "
                         "shorter day is a testing aid that makes Days rules act sooner")
    p.add_argument("--workers", type=_worker_count,
                   help="worker processes serving the port, each owning a share of the "
                        "keys (default 1; see docs/workers.md)")
    k = p.add_argument_group("cluster (see docs/cluster.md)")
    k.add_argument("--peers", help="ordered member list URL0,URL1,... (every member gets "
                                   "the same list); each key is owned by one member")
    k.add_argument("--node-id", type=int, help="this node's index K in --peers (default: "
                                               "the member whose host is this host's name)")
    k.add_argument("--cluster-secret", help="shared secret authenticating peer traffic "
                                            "(required with more than one member; prefer "
                                            "SQUALL_CLUSTER_SECRET: flags show in ps)")
    k.add_argument("--peer-ca", type=Path, help="PEM CA certificate(s) trusted for "
                   "https:// members in --peers (a private CA)")
    k.add_argument("--dirty-replicas", type=int, metavar="R",
                   help="members keeping each unflushed write: the key's owner and the "
                        "next R-1 on its ring (default 2 with two members or more; 1 "
                        "turns mirroring off)")
    tls = p.add_argument_group("TLS (see docs/tls.md)")
    tls.add_argument("--tls-cert", type=Path, help="PEM certificate chain: serve HTTPS "
                     "(reloaded on SIGHUP)")
    tls.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    lim = p.add_argument_group("limits and timeouts (see docs/s3-api.md, \"Limits\"; 0 = off)")
    lim.add_argument("--header-timeout", type=float,
                     help="seconds a client has to send a request line and headers "
                          "(default 30)")
    lim.add_argument("--body-idle-timeout", type=float,
                     help="seconds a request body may stall before 400 RequestTimeout "
                          "(default 60)")
    lim.add_argument("--keep-alive-timeout", type=float,
                     help="seconds an idle kept-alive connection stays open (default 5)")
    lim.add_argument("--max-header-bytes", type=int,
                     help="request line and headers, in bytes (default 65536); more: 400 "
                          "RequestHeaderSectionTooLarge")
    lim.add_argument("--max-header-count", type=int,
                     help="headers of one request (default 300)")
    lim.add_argument("--max-connections", type=int,
                     help="open client connections per process (default 1024); more are "
                          "closed at once")
    lim.add_argument("--max-requests", type=int,
                     help="requests in flight per process (default 512); more: 503 SlowDown")
    lim.add_argument("--backend-probe-interval", type=float,
                     help="seconds between reachability probes of an s3: backend (default 5)")
    sec = p.add_argument_group("access (see docs/security.md)")
    sec.add_argument("--public-status", action="store_const", const=True,
                     help="serve /_squall/status, /metrics, /cluster and /ui without "
                          "authentication (default: signed requests or the status token)")
    sec.add_argument("--status-token",
                     help="read-only token for the status views, sent as 'Authorization: "
                          "Bearer TOKEN' (16 characters or more; prefer "
                          "SQUALL_STATUS_TOKEN: flags show in ps)")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"])


def _worker_count(text: str) -> int:
    from gateway.settings import MAX_WORKERS

    if not text.strip().isdigit() or not 1 <= int(text) <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of processes from 1 to {MAX_WORKERS}, not {text!r}")
    return int(text)


Runner = Callable[[argparse.Namespace], int]


def _register(sub: argparse._SubParsersAction,  # type: ignore[type-arg]
              module_name: str, commands: tuple[str, ...]) -> dict[str, Runner]:
    """Add one module's subcommands; the runner of each by name."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        extra = missing_extra(exc)
        if extra is None:
            raise
        for name in commands:
            # Takes any arguments (no option prefix), so that the message is what it prints.
            p = sub.add_parser(name, help=f"(needs the {extra} extra)", add_help=False,
                               prefix_chars="\0")
            p.add_argument("rest", nargs="*")
        return {name: _unavailable(extra) for name in commands}
    before = set(sub.choices)
    module.register(sub)
    return {name: module.run for name in set(sub.choices) - before}


def _unavailable(extra: str) -> Runner:
    def run(args: argparse.Namespace) -> int:
        print(install_hint(args.command, extra), file=sys.stderr)
        return 2

    return run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="squall", description="Squall S3 burst buffer")
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    runners: dict[str, Runner] = {"serve": _serve}
    for module_name, commands in COMMAND_MODULES.items():
        runners.update(_register(sub, module_name, commands))
    args = parser.parse_args(argv)
    try:
        return runners[args.command](args)
    except ImportError as exc:  # an extra's module imported by the command as it runs
        extra = missing_extra(exc)
        if extra is None:
            raise
        print(install_hint(args.command, extra), file=sys.stderr)
        return 2


def _serve(args: argparse.Namespace) -> int:
    from gateway.server import serve
    from gateway.settings import load_settings

    overrides = {k: v for k, v in vars(args).items() if k not in ("command", "config")}
    try:
        settings = load_settings(args.config, **overrides)
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(p) for p in error["loc"])
            print(f"squall: invalid setting {field}: {error['msg']}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"squall: {exc}", file=sys.stderr)
        return 2
    from gateway.preflight import preflight

    os.umask(0o077)  # files and directories the gateway creates: 0600 / 0700
    try:
        if settings.workers > 1:
            from gateway.workers import plan

            plan.check(settings)  # what --workers refuses, before the other checks
        credentials, sock = preflight(settings, bind=settings.workers == 1)
        if settings.workers > 1:
            from gateway.workers.supervisor import serve_workers

            return serve_workers(settings)
        from gateway.workers.layout import prepare

        prepare(settings.data_dir, 1)
        serve(settings, credentials, sock)
    except ValueError as exc:
        print(f"squall: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        print(f"squall: cannot start: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    return 0

if __name__ == "__main__":
    sys.exit(main())
