"""S3Backend against real upstreams: the backend conformance suite.

* a second Squall (posix backend) in the direct mapping (Squall bucket = upstream bucket)
  and in the shared mapping (every Squall bucket a prefix of one upstream bucket);
* moto_server in the direct mapping (the mapping code is the same for every upstream; the
  shared mapping runs against Squall only, to keep the suite fast).

One backend per class, as a gateway keeps one for its lifetime (client and connection
pool reused); the suite's buckets are unique per test, so every test starts empty.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backends.s3 import S3Backend, S3Config
from tests.backends.conformance import BackendConformance
from tests.backends.s3.conftest import MIN_PART
from tests.backends.s3.servers import MOTO_ACCESS_KEY, MOTO_SECRET_KEY, MotoProcess
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess

# Small parts so that PUTs above PART take the multipart path within the suite.
PART = 256 * 1024


def squall_config(upstream: SquallProcess, **options: Any) -> S3Config:
    return S3Config(endpoint=upstream.endpoint, access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                    part_size=PART, min_part_size=MIN_PART, **options)


def moto_config(moto: MotoProcess, **options: Any) -> S3Config:
    return S3Config(endpoint=moto.endpoint, access_key=MOTO_ACCESS_KEY,
                    secret_key=MOTO_SECRET_KEY, part_size=PART, min_part_size=MIN_PART,
                    **options)


@pytest.fixture(scope="class")
async def squall_direct(upstream_squall: SquallProcess,
                        tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[S3Backend]:
    store = S3Backend(squall_config(upstream_squall),
                      spool_dir=tmp_path_factory.mktemp("spool"))
    yield store
    await store.aclose()


@pytest.fixture(scope="class")
async def squall_shared(upstream_squall: SquallProcess, squall_s3: Any,
                        tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[S3Backend]:
    shared = f"shared-{uuid.uuid4().hex[:12]}"
    squall_s3.create_bucket(Bucket=shared)
    store = S3Backend(squall_config(upstream_squall, bucket=shared, prefix="sq/"),
                      spool_dir=tmp_path_factory.mktemp("spool"))
    yield store
    await store.aclose()


@pytest.fixture(scope="class")
async def moto_direct(moto: MotoProcess,
                      tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[S3Backend]:
    store = S3Backend(moto_config(moto), spool_dir=tmp_path_factory.mktemp("spool"))
    yield store
    await store.aclose()


class TestSquallDirect(BackendConformance):
    min_part_size = MIN_PART
    records_part_layout = False

    @pytest.fixture
    def backend(self, squall_direct: S3Backend) -> S3Backend:
        return squall_direct


class TestSquallShared(BackendConformance):
    min_part_size = MIN_PART
    records_part_layout = False

    @pytest.fixture
    def backend(self, squall_shared: S3Backend) -> S3Backend:
        return squall_shared


class TestMotoDirect(BackendConformance):
    """Every tricky key is stored by moto_server too: ``tricky_keys`` is not narrowed."""

    min_part_size = MIN_PART
    records_part_layout = False

    @pytest.fixture
    def backend(self, moto_direct: S3Backend) -> S3Backend:
        return moto_direct
