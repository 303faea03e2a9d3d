"""Where the client commands find the gateway: ``--endpoint``, else ``SQUALL_ENDPOINT``,
else ``AWS_ENDPOINT_URL``, else http://127.0.0.1:9000, shown by ``--help``. The real
commands against the session's real gateway (and a port nothing listens on)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gateway.commands.options import DEFAULT_ENDPOINT, default_endpoint
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port

NOWHERE = f"http://127.0.0.1:{free_port()}"


def _squall(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("SQUALL_ENDPOINT", "AWS_ENDPOINT_URL")}
    return subprocess.run([sys.executable, "-m", "gateway.commands.cli", *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**base, "SQUALL_ACCESS_KEY": ACCESS_KEY,
                               "SQUALL_SECRET_KEY": SECRET_KEY, **env})


def test_precedence() -> None:
    assert default_endpoint({}) == (DEFAULT_ENDPOINT, None)
    assert default_endpoint({"AWS_ENDPOINT_URL": "http://a:1"}) == \
        ("http://a:1", "AWS_ENDPOINT_URL")
    assert default_endpoint({"AWS_ENDPOINT_URL": "http://a:1", "SQUALL_ENDPOINT": "http://s:2"}) \
        == ("http://s:2", "SQUALL_ENDPOINT")
    assert default_endpoint({"SQUALL_ENDPOINT": " ", "AWS_ENDPOINT_URL": "http://a:1"}) == \
        ("http://a:1", "AWS_ENDPOINT_URL")


@pytest.mark.parametrize("command", [["sync"], ["top"], ["user", "list"], ["qos", "show"],
                                     ["providers", "list"], ["cost"]])
def test_help_shows_the_default_and_where_it_comes_from(command: list[str]) -> None:
    plain = _squall(*command, "--help")
    assert plain.returncode == 0, plain.stderr
    text = " ".join(plain.stdout.split())
    assert f"default {DEFAULT_ENDPOINT}; taken from --endpoint" in text, text
    assert "SQUALL_ENDPOINT" in text and "AWS_ENDPOINT_URL" in text
    moved = _squall(*command, "--help", SQUALL_ENDPOINT="http://127.0.0.1:9100")
    assert "default http://127.0.0.1:9100 from $SQUALL_ENDPOINT;" in " ".join(
        moved.stdout.split())


def test_the_environment_names_the_gateway(squall: SquallProcess) -> None:
    # SQUALL_ENDPOINT beats AWS_ENDPOINT_URL
    done = _squall("sync", SQUALL_ENDPOINT=squall.endpoint, AWS_ENDPOINT_URL=NOWHERE)
    assert done.returncode == 0, done.stderr
    # AWS_ENDPOINT_URL alone
    done = _squall("user", "list", AWS_ENDPOINT_URL=squall.endpoint)
    assert done.returncode == 0, done.stderr
    # the flag beats both
    done = _squall("sync", "--endpoint", squall.endpoint, SQUALL_ENDPOINT=NOWHERE,
                   AWS_ENDPOINT_URL=NOWHERE)
    assert done.returncode == 0, done.stderr
    # and the one named is the one called
    done = _squall("top", "--once", SQUALL_ENDPOINT=NOWHERE)
    assert done.returncode == 1
    assert NOWHERE in done.stderr and "9000" not in done.stderr, done.stderr
