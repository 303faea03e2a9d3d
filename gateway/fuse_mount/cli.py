"""``squall mount ENDPOINT BUCKET MOUNTPOINT``: the command line of the FUSE client.

``register`` adds the subcommand to the ``squall`` parser; ``run`` executes it and
returns the exit code, as every client command (:mod:`gateway.client.failures`): 2 for a
bad option, mountpoint or missing credentials, 1 when the gateway cannot be reached or
refuses (the bucket does not exist, the credentials are refused) or files open at unmount
could not be stored.
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import logging
import os
import subprocess
import sys
from pathlib import Path

from backends.core.errors import NoSuchBucket, StorageError
from backends.core.units import parse_duration, parse_size
from gateway.client.credentials import FROM as CREDENTIALS_FROM
from gateway.client.credentials import credentials_from_env
from gateway.client.failures import FAILED, USAGE, ClientFailure, Unreachable, exit_status
from gateway.client.sigv4 import DEFAULT_REGION
from gateway.client.tls import add_ca_bundle_option, ca_bundle
from gateway.fuse_mount.errors import EndpointUnreachable, errno_for
from gateway.fuse_mount.routing import owner_router
from gateway.fuse_mount.settings import MountSettings, SettingsError, check_mountpoint

log = logging.getLogger("gateway.fuse_mount")
NAME = "squall mount"

# The mount needs the mount extra (the mount's own modules import it only as it runs):
# without it, ``squall mount`` says what to install (gateway/commands/extras.py).
for _needed in ("mfusepy", "boto3"):
    if importlib.util.find_spec(_needed) is None:
        raise ModuleNotFoundError(f"No module named {_needed!r}", name=_needed)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``mount`` subcommand."""
    p = subparsers.add_parser(
        "mount", help="mount a bucket as a directory (FUSE)",
        description="Mount BUCKET of the S3 endpoint ENDPOINT on MOUNTPOINT. Credentials come "
                    f"from {CREDENTIALS_FROM}. Runs until unmounted (fusermount3 -u "
                    "MOUNTPOINT) or stopped with SIGTERM/SIGINT.")
    p.add_argument("endpoint", help="gateway URL, e.g. http://127.0.0.1:9000")
    p.add_argument("bucket", help="bucket to mount")
    p.add_argument("mountpoint", type=Path, help="an existing, empty directory")
    p.add_argument("--background", action="store_true",
                   help="return once the mount is ready and keep serving in the background")
    p.add_argument("--block-size", default="8MiB",
                   help="upload part and read-ahead block size, at least 5MiB (default 8MiB)")
    p.add_argument("--readahead", default="16MiB",
                   help="0 disables reading ahead; otherwise sequential reads stream from one "
                        "GET (default 16MiB)")
    p.add_argument("--attr-timeout", type=float, default=1.0,
                   help="seconds attributes of files not open here are cached (default 1)")
    p.add_argument("--region", default=DEFAULT_REGION,
                   help=f"signing region (default {DEFAULT_REGION})")
    p.add_argument("--max-inflight", type=int, default=4,
                   help="parts of one open file uploading at once (memory: about "
                        "(N+1) x block size per file being written; default 4)")
    p.add_argument("--max-attempts", type=int, default=5,
                   help="tries of each S3 request, with backoff, before the file operation "
                        "fails (EIO; ENOSPC while the gateway answers 503 SlowDown; default 5)")
    p.add_argument("--writeback-cache", action=argparse.BooleanOptionalAction, default=True,
                   help="let the kernel cache writes and gather small ones into 1 MiB "
                        "requests (files changed by other clients are "
                        "detected at lookup and open, see docs/fuse-mount.md)")
    p.add_argument("--shared-files", action="append", default=[], metavar="GLOB",
                   help="keys (glob, e.g. 'ckpt/*.bin') that several mounts write at once, "
                        "each its own ranges (N-1 checkpoints): one upload per file, "
                        "completed by the last writer to close; repeatable")
    p.add_argument("--shared-lease", default="60s", metavar="DURATION",
                   help="a mount writing a shared file renews its lease a third of the way "
                        "into it; one that stops (it died) is counted as gone once it "
                        "expires, on the gateway's clock (default 60s)")
    p.add_argument("--direct-io", action="append", default=[], metavar="GLOB",
                   dest="direct_files",
                   help="keys (glob, e.g. 'ckpt/*') read and written past the kernel's page "
                        "cache, each read and write sent to the mount as the program asks "
                        "(for large sequential I/O; no shared mmap); repeatable")
    p.add_argument("--route-to-owners", action=argparse.BooleanOptionalAction, default=None,
                   help="send each object request straight to its key's owner when the "
                        "endpoint is a member of a Squall cluster. Default: automatic, when "
                        "the endpoint's ring can be read and every member URL is reachable "
                        "from here (else one warning, and every request goes to the "
                        "endpoint); --route-to-owners fails if the ring cannot be read")
    add_ca_bundle_option(p)
    p.add_argument("--staging-dir", type=Path,
                   help="directory for staging files of randomly written files (default $TMPDIR)")
    p.add_argument("--log-file", type=Path, help="append logs here (default: stderr)")
    p.add_argument("--log-level", default="info",
                   choices=["debug", "info", "warning", "error"])
    p.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    """Validate, then mount in the foreground (or hand over to a background process)."""
    _configure_logging(args)
    return exit_status(NAME, lambda: _run(args), report=lambda line: _report_failure(args, line))


def _run(args: argparse.Namespace) -> int:
    settings = MountSettings(
        endpoint=args.endpoint.rstrip("/"), bucket=args.bucket,
        mountpoint=args.mountpoint.absolute(), credentials=credentials_from_env(),
        block_size=parse_size(args.block_size), readahead=parse_size(args.readahead),
        attr_timeout=args.attr_timeout, region=args.region,
        max_inflight=args.max_inflight, staging_dir=args.staging_dir,
        max_attempts=args.max_attempts, writeback_cache=args.writeback_cache,
        route_to_owners=args.route_to_owners, ca_bundle=ca_bundle(args.ca_bundle),
        shared_files=tuple(args.shared_files), direct_files=tuple(args.direct_files),
        shared_lease=_duration("--shared-lease", args.shared_lease))
    check_mountpoint(settings.mountpoint)
    # --route-to-owners: a ring that cannot be read fails before anything else.
    router = owner_router(settings) if settings.route_to_owners else None
    _check_bucket(settings)
    if args.background:
        return _spawn_background(args)
    if settings.route_to_owners is None:  # automatic: decided (and warned) where it runs
        router = owner_router(settings)
    from gateway.fuse_mount.mount import MountFailed, run_mount

    try:
        run_mount(settings, router=router, on_ready=lambda: _report_ready(args))
    except MountFailed as exc:
        raise SettingsError(f"cannot mount {settings.mountpoint}: {exc}") from exc
    return 0


def _check_bucket(settings: MountSettings) -> None:
    """HeadBucket (at the endpoint) before mounting: ClientFailure when the gateway
    cannot be reached or refuses."""
    from gateway.fuse_mount.mount import build_store

    bucket = settings.bucket
    try:
        build_store(settings, max_attempts=min(2, settings.max_attempts)).check_bucket()
    except EndpointUnreachable as exc:
        raise Unreachable(settings.endpoint, exc) from exc
    except NoSuchBucket as exc:
        raise ClientFailure(f"bucket {bucket!r} does not exist at "
                            f"{settings.endpoint}") from exc
    except StorageError as exc:
        if errno_for(exc) == errno.EACCES:
            raise ClientFailure(f"access to bucket {bucket!r} denied: check the "
                                f"credentials ({exc.message})") from exc
        raise ClientFailure(f"bucket {bucket!r}: {exc.message}") from exc


def _duration(flag: str, text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise SettingsError(f"{flag}: {exc}") from exc


def _spawn_background(args: argparse.Namespace) -> int:
    """Start the mount as a detached process; return once it reports ready (or failed)."""
    read_fd, write_fd = os.pipe()
    argv = [sys.executable, "-m", "gateway.fuse_mount", "mount", args.endpoint, args.bucket,
            str(args.mountpoint.absolute()), "--block-size", args.block_size,
            "--readahead", args.readahead, "--attr-timeout", str(args.attr_timeout),
            "--region", args.region, "--max-inflight", str(args.max_inflight),
            "--max-attempts", str(args.max_attempts),
            "--log-level", args.log_level, "--ready-fd", str(write_fd)]
    if args.staging_dir:
        argv += ["--staging-dir", str(args.staging_dir.absolute())]
    argv.append("--writeback-cache" if args.writeback_cache else "--no-writeback-cache")
    if args.route_to_owners is not None:  # absent: automatic there too
        argv.append("--route-to-owners" if args.route_to_owners else "--no-route-to-owners")
    for pattern in args.shared_files:
        argv += ["--shared-files", pattern]
    argv += ["--shared-lease", args.shared_lease]
    for pattern in args.direct_files:
        argv += ["--direct-io", pattern]
    if args.log_file:
        argv += ["--log-file", str(args.log_file.absolute())]
    if args.ca_bundle:
        argv += ["--ca-bundle", str(args.ca_bundle.absolute())]
    with open(os.devnull, "r+b") as null:
        child = subprocess.Popen(argv, stdin=null, stdout=null, stderr=null,
                                 pass_fds=(write_fd,), start_new_session=True, cwd="/",
                                 env=_child_env())
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        message = pipe.read().decode(errors="replace").strip()
    if message == "ready":
        print(f"{NAME}: {args.bucket} mounted on {args.mountpoint} (pid {child.pid})",
              file=sys.stderr)
        return 0
    status = child.wait()
    print(f"{NAME}: {message or f'mount process exited with {status}'}", file=sys.stderr)
    return status if status in (FAILED, USAGE) else USAGE


def _child_env() -> dict[str, str]:
    """This environment, with this process's code first on the import path: the detached
    process (started in ``/``) runs the same Squall as this one."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{path}" if path else root}


def _report_ready(args: argparse.Namespace) -> None:
    if args.ready_fd is not None:
        os.write(args.ready_fd, b"ready\n")
        os.close(args.ready_fd)
        args.ready_fd = None


def _report_failure(args: argparse.Namespace, line: str) -> None:
    """A failure's line: to the waiting parent (``--background``), else to stderr."""
    if args.ready_fd is not None:
        os.write(args.ready_fd, line.removeprefix(f"{NAME}: ").encode())
        os.close(args.ready_fd)
        args.ready_fd = None
    else:
        print(line, file=sys.stderr)


def _configure_logging(args: argparse.Namespace) -> None:
    handler: logging.Handler = (logging.FileHandler(args.log_file) if args.log_file
                                else logging.StreamHandler(sys.stderr))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    log.setLevel(args.log_level.upper())
