"""Shared fixtures: one real gateway per session, real clients talking to it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from hypothesis import HealthCheck, settings

from tests.support.etcd import EtcdServer, etcd_available
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

#: Fuzz tests (hypothesis) are derandomized: the same examples on every run, CI included.
#: ``SQUALL_FUZZ_SEED=N`` explores other examples (reproducibly for the same N). No example
#: database: a failure prints its example and a reproduce blob instead.
FUZZ_SEED = os.environ.get("SQUALL_FUZZ_SEED")
settings.register_profile("squall", deadline=None, database=None, print_blob=True,
                          derandomize=FUZZ_SEED is None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("squall")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if FUZZ_SEED is not None and config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = FUZZ_SEED  # read by hypothesis' own pytest plugin


#: Tests left out of the quick tier (``./scripts/test.sh --quick`` runs ``-m "not slow"``):
#: these directories and files, and every ``*_e2e.py`` (end-to-end runs of real gateways,
#: clients, mounts and clusters), besides the tests marked ``slow`` themselves.
SLOW_PATHS = (
    "tests/gateway/fuse_mount/", "tests/gateway/s3api/clients/", "tests/gateway/s3api/fuzz/",
    "tests/gateway/http/workers/", "tests/helm/", "tests/docs/",
    "tests/gateway/cache/test_elastic_server.py", "tests/gateway/cache/test_crash.py",
    "tests/gateway/cache/test_uploads_beyond_cache_server.py",
    "tests/loadtests/test_bench.py", "tests/loadtests/test_fuse_bench.py",
    "tests/loadtests/test_elastic_bench.py", "tests/loadtests/test_burst.py",
    "tests/loadtests/test_overflow_bench.py",
    "tests/loadtests/test_memory.py", "tests/loadtests/test_warp.py",
    "tests/loadtests/test_scenarios.py", "tests/loadtests/test_qos_bench.py",
    "tests/loadtests/test_mpi_app.py",
    "tests/gateway/versioning/test_crash.py", "tests/gateway/cost/test_calibrate.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) \
            else item.path.as_posix()
        if path.endswith("_e2e.py") or path.startswith(SLOW_PATHS):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """A real etcd server for the session's clusters (each uses a key prefix of its own)."""
    reason = etcd_available()
    if reason is not None:
        pytest.skip(reason)
    with EtcdServer(tmp_path_factory.mktemp("etcd")) as server:
        yield server


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
