"""Fixtures for driving a running gateway with real S3 clients.

Every CLI runs in a subprocess with a timeout and an environment built from scratch for the
test, so the host's AWS or s3cmd configuration is never read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from minio import Minio

from tests.gateway.s3api.clients.helpers import Cli, make_aws, make_minio, make_s3cmd
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


@pytest.fixture
def aws(squall: SquallProcess, tmp_path: Path) -> Cli:
    """``aws --endpoint-url <squall>`` with the test credentials."""
    return make_aws(squall.endpoint, tmp_path / "aws-home")


@pytest.fixture
def s3cmd(squall: SquallProcess, tmp_path: Path) -> Cli:
    """``s3cmd -c <temp config>`` pointed at the gateway."""
    return make_s3cmd(squall.endpoint, tmp_path / "s3cmd-home")


@pytest.fixture(scope="session")
def mc(squall: SquallProcess) -> Minio:
    """The MinIO Python client (no region given: it asks the gateway for it)."""
    return make_minio(squall.endpoint)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def aio_s3(squall: SquallProcess) -> AsyncIterator[Any]:
    """An aiobotocore S3 client with a connection pool large enough for gather()."""
    config = AioConfig(retries={"max_attempts": 1}, s3={"addressing_style": "path"},
                       max_pool_connections=32)
    async with get_session().create_client(
            "s3", endpoint_url=squall.endpoint, region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            config=config) as client:
        yield client
