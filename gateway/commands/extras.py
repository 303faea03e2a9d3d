"""Which optional extra of the squall package provides a module a command needs.

``squall serve`` needs only the runtime dependencies; the client commands, the FUSE mount,
the load tests and the plots need an extra (pyproject.toml ``[project.optional-dependencies]``).
A command run without its extra says which one to install instead of a traceback.
"""

from __future__ import annotations

# Top-level import name -> the extra that installs it.
EXTRA_OF_MODULE: dict[str, str] = {
    "httpx": "client",
    "rich": "client",
    "tqdm": "client",
    "mfusepy": "mount",
    "boto3": "mount",
    "locust": "bench",
    "gevent": "bench",
    "matplotlib": "plot",
}


# Command module -> the extra it needs, when that is not the one of the first missing
# module it meets (the mount extra includes the client extra's packages: a mount without
# httpx still needs the mount extra, not only the client one).
EXTRA_OF_COMMAND: dict[str, str] = {
    "gateway.fuse_mount.cli": "mount",
}


def missing_extra(exc: ImportError, command_module: str | None = None) -> str | None:
    """The extra to install for the module ``exc`` failed to import (the one
    ``command_module`` needs, if it names one), or None when the module is not one an
    extra provides (a real bug, to be raised as it is)."""
    name = exc.name or ""
    extra = EXTRA_OF_MODULE.get(name.partition(".")[0])
    if extra is None:
        return None
    return EXTRA_OF_COMMAND.get(command_module or "", extra)


def install_hint(command: str, extra: str) -> str:
    """The one-line message for a command whose extra is not installed."""
    return f"squall: {command} needs the {extra} extra: pip install 'squall[{extra}]'"
