"""Conditional writes hold across the members of a cluster: writers on both members of a
two-member cluster (coordinated by etcd) race ``If-None-Match: *`` PutObjects and CompleteMultipartUploads on
keys owned by either member; exactly one wins, the others get 412 PreconditionFailed or
409 ConditionalRequestConflict. A self-contained cluster of its own (the package's
``cluster`` fixture is left alone)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import make_client
from tests.gateway.cluster.conftest import Cluster
from tests.gateway.test_conditional_races_e2e import check_one_winner, race
from tests.support.etcd import EtcdServer

PER_MEMBER = 3


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, etcd: EtcdServer) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("conditional"), size=2,
                      coordinator=etcd.url).start()
    yield running
    running.stop()


@pytest.mark.parametrize("owner", [0, 1])
def test_racing_if_none_match_across_members(pair: Cluster, owner: int) -> None:
    clients = [make_client(node.endpoint) for node in pair.nodes for _ in range(PER_MEMBER)]
    bucket = f"cond-{uuid.uuid4().hex[:12]}"
    clients[0].create_bucket(Bucket=bucket)
    for round_ in range(3):
        key = pair.key_owned_by(owner, bucket, f"r{round_}")
        bodies = [f"{round_}-{i}".encode() for i in range(len(clients))]
        outcomes = race([
            (lambda c=c, b=b, k=key: c.put_object(Bucket=bucket, Key=k, Body=b,
                                                   IfNoneMatch="*"))
            for c, b in zip(clients, bodies, strict=True)])
        winner = check_one_winner(outcomes)
        for client in (clients[0], clients[-1]):  # read-after-write on both members
            assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == \
                bodies[winner]


def test_racing_conditional_completions_across_members(pair: Cluster) -> None:
    clients = [make_client(node.endpoint) for node in pair.nodes for _ in range(PER_MEMBER)]
    bucket = f"cond-{uuid.uuid4().hex[:12]}"
    clients[0].create_bucket(Bucket=bucket)
    key = pair.key_owned_by(1, bucket, "m")
    uploads = []
    for i, client in enumerate(clients):
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        part = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1,
                                  Body=f"upload {i}".encode())
        uploads.append((upload_id, part["ETag"]))
    outcomes = race([
        (lambda c=c, u=u, e=e: c.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=u, IfNoneMatch="*",
            MultipartUpload={"Parts": [{"ETag": e, "PartNumber": 1}]}))
        for c, (u, e) in zip(clients, uploads, strict=True)])
    winner = check_one_winner(outcomes)
    assert clients[0].get_object(Bucket=bucket, Key=key)["Body"].read() == \
        f"upload {winner}".encode()
