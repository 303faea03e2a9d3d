"""The largest legal object metadata through every member: of a 2-member cluster, and of
a ``--workers 2`` gateway (whose workers talk the same peer protocol)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_client
from tests.gateway.cluster.conftest import SLOW_BACKEND, Cluster
from tests.gateway.http.workers.conftest import wait_healthy
from tests.support.server import SquallProcess

# S3: 2 KB of user metadata (names and values), 8 KB of request headers in all.
USER_META = {f"m{i}": ('v"\\' * 60)[:180] for i in range(11)}  # 11 x (2 + 180) < 2048
DISPOSITION = 'attachment; filename="' + "d\\\"" * 1300 + '"'  # escapes double it in JSON


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("bigmeta-cluster"), size=2,
                      args=SLOW_BACKEND).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    data: Path = tmp_path_factory.mktemp("bigmeta-workers") / "data"
    server = SquallProcess(data, ["--workers", "2", *SLOW_BACKEND]).start()
    wait_healthy(server)
    yield server
    assert server.stop() == 0, server.log()


def check_everywhere(clients: list[Any]) -> None:
    bucket = f"big-{uuid.uuid4().hex[:12]}"
    clients[0].create_bucket(Bucket=bucket)
    for writer, s3 in enumerate(clients):
        for i in range(4):  # keys spread over the owners
            key = f"w{writer}-{i}"
            s3.put_object(Bucket=bucket, Key=key, Body=b"data", Metadata=USER_META,
                          ContentDisposition=DISPOSITION)
            for reader in clients:
                head = reader.head_object(Bucket=bucket, Key=key)
                assert head["Metadata"] == USER_META
                assert head["ContentDisposition"] == DISPOSITION
                got = reader.get_object(Bucket=bucket, Key=key)
                assert got["Body"].read() == b"data" and got["Metadata"] == USER_META
                copy = f"{key}-copy-{clients.index(reader)}"
                reader.copy_object(Bucket=bucket, Key=copy,
                                   CopySource={"Bucket": bucket, "Key": key})
                assert reader.head_object(Bucket=bucket, Key=copy)["Metadata"] == USER_META


def test_largest_metadata_through_every_member(pair: Cluster) -> None:
    check_everywhere(pair.clients)


def test_largest_metadata_through_every_worker(workers: SquallProcess) -> None:
    # Separate clients (own connections) land on both workers.
    check_everywhere([make_client(workers.endpoint) for _ in range(4)])
