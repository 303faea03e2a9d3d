"""Shared fixtures: one real gateway per session, real clients talking to it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


@pytest.fixture(scope="session")
def squall(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    """A real ``squall serve`` on a loopback port for the whole session."""
    data_dir: Path = tmp_path_factory.mktemp("squall") / "data"
    server = SquallProcess(data_dir, ["--min-part-size", str(5 * 1024 * 1024)]).start()
    yield server
    assert server.stop() == 0, server.log()


def make_client(endpoint: str, **config: object):  # type: ignore[no-untyped-def]
    config.setdefault("signature_version", "s3v4")  # presigned URLs too
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}, **config))


@pytest.fixture(scope="session")
def s3(squall: SquallProcess):  # type: ignore[no-untyped-def]
    """boto3 with its default checksum behaviour (CRC32 trailers on uploads)."""
    return make_client(squall.endpoint)


@pytest.fixture
def bucket(s3) -> str:  # type: ignore[no-untyped-def]
    name = f"t-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=name)
    return name
