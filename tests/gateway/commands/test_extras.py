"""Commands whose optional extra is not installed say which one to install.

The test environment has every extra installed, so a missing one is injected: the
``squall`` command runs in a child interpreter whose import system refuses the extra's
packages (as if they were not installed). Everything else is the real command line.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from gateway.commands.cli import COMMAND_MODULES
from gateway.commands.extras import EXTRA_OF_MODULE

# Runs ``squall ARGS`` with the top-level packages named in argv[1] (comma-separated)
# made unimportable.
CHILD = """
import sys
from importlib.abc import MetaPathFinder

blocked = set(sys.argv[1].split(","))

class Missing(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
from gateway.commands.cli import main
sys.exit(main(sys.argv[2:]))
"""


def squall_without(packages: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, ",".join(packages), *args],
                          capture_output=True, text=True, timeout=60, check=False)


CLIENT = [m for m, extra in EXTRA_OF_MODULE.items() if extra == "client"]


@pytest.mark.parametrize("args", [
    ["sync", "--endpoint", "http://127.0.0.1:1"],
    ["top", "--help"],
    ["qos", "show"],
    ["providers", "list"],
    ["cost", "--endpoint", "http://127.0.0.1:1"],  # imports httpx only as it runs
    ["calibrate", "--endpoint", "http://127.0.0.1:1", "--sizes", "1MiB", "--out", "c.json"],
])
def test_client_command_without_the_client_extra(args: list[str]) -> None:
    proc = squall_without(CLIENT, *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        f"squall: {args[0]} needs the client extra: pip install 'squall[client]'\n")
    assert proc.stdout == ""


def test_mount_without_the_mount_extra(tmp_path: object) -> None:
    proc = squall_without(["mfusepy", "boto3"], "mount", "bkt", str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "squall: mount needs the mount extra: pip install 'squall[mount]'\n"


def test_serve_needs_no_extra() -> None:
    """``squall serve`` parses and starts its pre-flight without any extra (an invalid
    setting stops it right after, with its own message)."""
    extras = list(EXTRA_OF_MODULE)
    proc = squall_without(extras, "serve", "--listen", "nowhere")
    assert "pip install" not in proc.stderr
    assert proc.stderr.startswith("squall: "), proc.stderr
    assert proc.returncode == 2
    help_proc = squall_without(extras, "--help")
    assert help_proc.returncode == 0
    assert "(needs the client extra)" in help_proc.stdout


def test_help_of_the_base_install_names_each_command_s_extra() -> None:
    """On the base install (no extra), ``squall --help`` names the extra each command
    asks for when run: the mount extra for mount, though httpx is the first it misses."""
    extras = list(EXTRA_OF_MODULE)
    help_lines = squall_without(extras, "--help").stdout.splitlines()
    mount = [line for line in help_lines if line.strip().startswith("mount ")]
    assert mount and "(needs the mount extra)" in mount[0], help_lines
    sync = [line for line in help_lines if line.strip().startswith("sync ")]
    assert sync and "(needs the client extra)" in sync[0], help_lines
    proc = squall_without(extras, "mount", "http://127.0.0.1:1", "bkt", "/tmp")
    assert proc.returncode == 2
    assert proc.stderr == "squall: mount needs the mount extra: pip install 'squall[mount]'\n"


def test_a_real_import_error_is_not_hidden() -> None:
    """A missing module that no extra provides is a bug: its traceback shows."""
    proc = squall_without(["botocore"], "sync")
    assert proc.returncode == 1
    assert "ModuleNotFoundError" in proc.stderr
    assert "pip install" not in proc.stderr


@pytest.mark.parametrize("module_name", sorted(COMMAND_MODULES))
def test_command_table_matches_the_modules(module_name: str) -> None:
    """gateway.commands.cli's table names exactly the subcommands each module registers."""
    sub = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(module_name).register(sub)
    assert tuple(sub.choices) == COMMAND_MODULES[module_name]
