"""Two users (alice, bob), the admin and an anonymous caller as boto3 clients of the
module's own ``gateway`` fixture."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.config import Config

from tests.gateway.auth.test_users_e2e import add_user, client
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


def anonymous_client(endpoint: str) -> Any:
    """A boto3 client that signs nothing."""
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        config=Config(signature_version=UNSIGNED,
                                      retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))


@pytest.fixture(scope="module")
def alice(gateway: SquallProcess) -> dict[str, Any]:
    return add_user(gateway, "alice")


@pytest.fixture(scope="module")
def bob(gateway: SquallProcess) -> dict[str, Any]:
    return add_user(gateway, "bob")


@pytest.fixture(scope="module")
def s3_alice(gateway: SquallProcess, alice: dict[str, Any]) -> Any:
    return client(gateway.endpoint, alice["access_key"], alice["secret_key"])


@pytest.fixture(scope="module")
def s3_bob(gateway: SquallProcess, bob: dict[str, Any]) -> Any:
    return client(gateway.endpoint, bob["access_key"], bob["secret_key"])


@pytest.fixture(scope="module")
def s3_admin(gateway: SquallProcess) -> Any:
    return client(gateway.endpoint, ACCESS_KEY, SECRET_KEY)


@pytest.fixture(scope="module")
def anonymous(gateway: SquallProcess) -> Any:
    return anonymous_client(gateway.endpoint)
