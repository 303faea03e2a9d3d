"""Gateway configurations to compare: a name and the extra ``squall serve`` arguments."""

from __future__ import annotations

import shlex
import shutil
import sys
from dataclasses import dataclass

# Defaults: the shipped durability (fsync before the PUT is acknowledged) and the relaxed one.
DEFAULT_CONFIGS = ("squall=", "squall-nofsync=--durability none")

SQUALL_TEMPLATE = (
    "{squall} serve --listen {host}:{port} --data-dir {data_dir} --backend posix:{backend_dir}"
)


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """A named set of extra arguments appended to the server command."""

    name: str
    args: tuple[str, ...] = ()

    @property
    def durability(self) -> str | None:
        """The value of ``--durability`` in the args, if any."""
        args = list(self.args)
        for i, arg in enumerate(args):
            if arg.startswith("--durability="):
                return arg.split("=", 1)[1]
            if arg == "--durability" and i + 1 < len(args):
                return args[i + 1]
        return None

    def fsync(self, *, squall: bool = True) -> bool | None:
        """Whether each PUT is fsynced before it is acknowledged (None: unknown).

        ``--durability none`` means no, any other value yes; without the flag Squall's
        default is fsync, and another server (``--server-cmd``) is unknown.
        """
        if self.durability is not None:
            return self.durability != "none"
        return True if squall else None

    @property
    def describe(self) -> str:
        return shlex.join(self.args) or "(defaults)"


def parse_named(text: str) -> tuple[str, str]:
    """Split ``NAME=VALUE`` (the value may be empty, the name may not)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"expected NAME=VALUE, got {text!r} (example: nofsync=--durability none)")
    return name.strip(), value.strip()


def parse_config(text: str) -> GatewayConfig:
    """Parse ``NAME=ARGS`` (``ARGS`` split like a shell would; may be empty)."""
    name, args = parse_named(text)
    return GatewayConfig(name, tuple(shlex.split(args)))


def squall_command() -> str:
    """How to run the gateway: the ``squall`` script if installed, else the module."""
    return shutil.which("squall") or f"{shlex.quote(sys.executable)} -m gateway.commands.cli"


def server_command(template: str, config: GatewayConfig, **fields: object) -> list[str]:
    """The argv for one server: ``template`` with ``{port}``, ``{data_dir}``... filled in,
    then the config's own arguments."""
    quoted = {name: shlex.quote(str(value)) for name, value in fields.items()}
    values = {"squall": squall_command(), "python": shlex.quote(sys.executable), **quoted}
    return shlex.split(template.format(**values)) + list(config.args)
