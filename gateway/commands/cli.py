"""The ``squall`` command line."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from gateway.commands.extras import install_hint, missing_extra

# The modules of the subcommands besides ``serve``, with the subcommands each adds. Each
# has ``register(subparsers)`` (adding its subcommands) and ``run(args) -> int`` (running
# any of them); a new subcommand module is one more entry here. A module whose optional
# extra is not installed still gets its subcommands, which then say what to install.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "gateway.commands.sync": ("sync",),
    "gateway.fuse_mount.cli": ("mount",),
    "gateway.commands.cost": ("cost", "calibrate", "predict", "advise"),
    "gateway.commands.store": ("fsck", "providers"),
    "gateway.commands.qos": ("qos",),
    "gateway.commands.top": ("top",),
    "gateway.commands.users": ("user",),
    "gateway.commands.cluster": ("cluster",),
}


def _serve_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from gateway.config.flags import add_setting_flags
    from gateway.config.settings import SECTIONS

    p = sub.add_parser("serve", help="run the S3 gateway",
                       description="Run the S3 gateway. Every option is also a SQUALL_* "
                                   "environment variable and a key of the --config file "
                                   "(docs/configuration.md); flags beat the environment, "
                                   "which beats the file.")
    p.add_argument("--config", type=Path, help="TOML file with settings")
    add_setting_flags(p, SECTIONS)


Runner = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """A bad argument is one line (as every bad value the settings refuse), not the
    usage of ``squall serve``'s many options before it; ``--help`` still shows them.
    Subcommands' parsers are of this class too (argparse makes them of their parent's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _register(sub: argparse._SubParsersAction,  # type: ignore[type-arg]
              module_name: str, commands: tuple[str, ...]) -> dict[str, Runner]:
    """Add one module's subcommands; the runner of each by name."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        extra = missing_extra(exc, module_name)
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
    parser = _Parser(prog="squall", description="Squall S3 burst buffer")
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    runners: dict[str, Runner] = {"serve": _serve}
    for module_name, commands in COMMAND_MODULES.items():
        runners.update(_register(sub, module_name, commands))
    args = parser.parse_args(argv)
    try:
        return runners[args.command](args)
    except ImportError as exc:  # an extra's module imported by the command as it runs
        module_of = {c: m for m, names in COMMAND_MODULES.items() for c in names}
        extra = missing_extra(exc, module_of.get(args.command))
        if extra is None:
            raise
        print(install_hint(args.command, extra), file=sys.stderr)
        return 2


def _serve(args: argparse.Namespace) -> int:
    from gateway.config.settings import load_settings
    from gateway.config.sources import SettingsError
    from gateway.http.server import serve

    overrides = {k: v for k, v in vars(args).items() if k not in ("command", "config")}
    try:
        settings = load_settings(args.config, **overrides)
    except SettingsError as exc:
        for line in exc.lines:
            print(f"squall: {line}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"squall: {exc}", file=sys.stderr)
        return 2
    from gateway.config.preflight import preflight
    from gateway.dashboard.access import with_run_token

    settings = with_run_token(settings)  # the dashboard's way in (docs/dashboard.md)
    os.umask(0o077)  # files and directories the gateway creates: 0600 / 0700
    try:
        if settings.workers_auto:
            from gateway.http.workers.layout import count_for_auto

            kept = count_for_auto(settings.data_dir, settings.workers)
            settings = settings.model_copy(update={"workers": kept})
        if settings.workers > 1:
            from gateway.http.workers import plan

            plan.check(settings)  # what --workers refuses, before the other checks
        credentials, sock = preflight(settings, bind=settings.workers == 1)
        from gateway.config.data_lock import hold_data_dir

        # Before anything in the data directory is changed; held until the process ends.
        lock = hold_data_dir(settings.data_dir)
        if settings.workers > 1:
            from gateway.http.workers.supervisor import serve_workers

            return serve_workers(settings)
        from gateway.http.workers.layout import prepare

        prepare(settings.data_dir, 1)
        serve(settings, credentials, sock)
    except ValueError as exc:
        print(f"squall: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        print(f"squall: cannot start: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    os.close(lock)
    return 0

if __name__ == "__main__":
    sys.exit(main())
