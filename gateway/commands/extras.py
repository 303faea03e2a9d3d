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


def missing_extra(exc: ImportError) -> str | None:
    """The extra that provides the module ``exc`` failed to import, or None when the
    module is not one an extra provides (a real bug, to be raised as it is)."""
    name = exc.name or ""
    return EXTRA_OF_MODULE.get(name.partition(".")[0])


def install_hint(command: str, extra: str) -> str:
    """The one-line message for a command whose extra is not installed."""
    return f"squall: {command} needs the {extra} extra: pip install 'squall[{extra}]'"
