"""The options every command that talks to a running gateway takes: where it is, the
signing region and the CA bundle of its certificate.

Where the gateway is: ``--endpoint``, else ``SQUALL_ENDPOINT``, else ``AWS_ENDPOINT_URL``
(what the AWS CLI and SDKs read), else ``http://127.0.0.1:9000``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from gateway.client.sigv4 import DEFAULT_REGION
from gateway.client.tls import add_ca_bundle_option

DEFAULT_ENDPOINT = "http://127.0.0.1:9000"
#: The environment variables naming the gateway, the first set one wins.
ENDPOINT_VARIABLES = ("SQUALL_ENDPOINT", "AWS_ENDPOINT_URL")


def default_endpoint(environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """The gateway URL when ``--endpoint`` is not given, and the environment variable it
    comes from (None: the built-in default)."""
    env = os.environ if environ is None else environ
    for name in ENDPOINT_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            return value, name
    return DEFAULT_ENDPOINT, None


def add_endpoint_option(p: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup,
                        help: str = "gateway URL") -> None:
    """``--endpoint``, its default taken from the environment and shown by ``--help``."""
    value, source = default_endpoint()
    origin = f" from ${source}" if source else ""
    order = ", ".join(f"${name}" for name in ENDPOINT_VARIABLES)
    p.add_argument("--endpoint", default=value,
                   help=f"{help} (default {value.replace('%', '%%')}{origin}; taken from "
                        f"--endpoint, else {order}, else {DEFAULT_ENDPOINT})")


def add_gateway_options(p: argparse.ArgumentParser, *, endpoint: bool = True,
                        endpoint_help: str = "gateway URL", region: bool = True) -> None:
    """``--endpoint`` (unless the caller adds its own), ``--region`` (unless the command
    signs nothing) and ``--ca-bundle``."""
    if endpoint:
        add_endpoint_option(p, endpoint_help)
    if region:
        p.add_argument("--region", default=DEFAULT_REGION, help="signing region")
    add_ca_bundle_option(p)
