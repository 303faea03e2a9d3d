"""Session upstreams for the s3 backend tests: a second real Squall (posix), moto_server,
and a MinIO server (skipped, with the reason, where ``minio`` is not installed)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config

from loadtests.bench.server import ServerProcess
from loadtests.minio.install import missing_reason
from loadtests.minio.single import single_node
from tests.backends.s3.servers import MOTO_ACCESS_KEY, MOTO_SECRET_KEY, MotoProcess
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

# The conformance suite's min_part_size, given to both upstreams so EntityTooSmall agrees.
MIN_PART = 64 * 1024


@pytest.fixture(scope="session")
def upstream_squall(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    """A real ``squall serve`` on the posix backend, without a cache tier in front."""
    data_dir = tmp_path_factory.mktemp("s3-upstream") / "data"
    server = SquallProcess(data_dir, ["--min-part-size", str(MIN_PART), "--cache-size", "0",
                                      "--durability", "none"]).start()
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoProcess]:
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    server = MotoProcess(log, min_part_size=MIN_PART).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def minio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A real single-drive MinIO server on loopback (the test credentials are its root)."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    server = single_node(tmp_path_factory.mktemp("minio"), ACCESS_KEY, SECRET_KEY)
    server.start()
    yield server
    server.stop()


def boto3_client(endpoint: str, access_key: str = ACCESS_KEY,
                 secret_key: str = SECRET_KEY):  # type: ignore[no-untyped-def]
    """A plain boto3 client to look at an upstream directly."""
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access_key,
                        aws_secret_access_key=secret_key, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1},
                                      s3={"addressing_style": "path"}))


@pytest.fixture(scope="session")
def squall_s3(upstream_squall: SquallProcess):  # type: ignore[no-untyped-def]
    return boto3_client(upstream_squall.endpoint)


@pytest.fixture(scope="session")
def moto_s3(moto: MotoProcess):  # type: ignore[no-untyped-def]
    return boto3_client(moto.endpoint, MOTO_ACCESS_KEY, MOTO_SECRET_KEY)


@pytest.fixture(scope="session")
def minio_s3(minio: ServerProcess):  # type: ignore[no-untyped-def]
    return boto3_client(minio.endpoint)
