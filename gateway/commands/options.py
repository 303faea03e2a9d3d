"""The options every command that talks to a running gateway takes: where it is, the
signing region and the CA bundle of its certificate."""

from __future__ import annotations

import argparse

from gateway.client.sigv4 import DEFAULT_REGION
from gateway.client.tls import add_ca_bundle_option

DEFAULT_ENDPOINT = "http://127.0.0.1:9000"


def add_gateway_options(p: argparse.ArgumentParser, *, endpoint: bool = True,
                        endpoint_help: str = "gateway URL", region: bool = True) -> None:
    """``--endpoint`` (unless the caller adds its own), ``--region`` (unless the command
    signs nothing) and ``--ca-bundle``."""
    if endpoint:
        p.add_argument("--endpoint", default=DEFAULT_ENDPOINT, help=endpoint_help)
    if region:
        p.add_argument("--region", default=DEFAULT_REGION, help="signing region")
    add_ca_bundle_option(p)
