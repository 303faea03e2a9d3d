"""Mirrored write-back (``--dirty-replicas``, default 2) in a cluster coordinated by a real
etcd: the unflushed writes of a member that is killed and loses its data directory are
served, taken over and flushed by the others once its lease has expired; the member
comes back empty, joins again and gets its keys back with what was written meanwhile.
With ``--dirty-replicas 1`` a member's keys wait for it while it is down. Real members
over one shared posix directory, a throttled backend (data stays dirty)."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.gateway.cluster.conftest import Cluster
from tests.support.etcd import EtcdServer
from tests.support.server import run_sync

BUCKET = "mirrored"
#: a member's mirror copies (in <data dir>/mirror, or each worker's with --workers N)
# The backend takes 2 KB/s: most of the 200 objects are still dirty when a member dies.
THROTTLED = ("--backend-bandwidth", "2KB/s", "--inactivity-delay", "3600")


def _stop(cluster: Cluster) -> None:
    for node in cluster.nodes:
        if node.proc is not None and node.proc.poll() is None:
            node.stop()


@pytest.fixture
def mirrored(tmp_path: Path, etcd: EtcdServer) -> Iterator[Cluster]:
    running = Cluster(tmp_path, args=THROTTLED, coordinator=etcd.url).start()
    yield running
    _stop(running)


def _read(cluster: Cluster, node: int, key: str) -> bytes:
    body: bytes = cluster.clients[node].get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return body


def _wait_gone(cluster: Cluster, victim: int) -> None:
    """Until the others' ring lacks the victim (its lease expired) and they serve."""
    cluster.wait_members([n for n in range(len(cluster.nodes)) if n != victim])


def test_acknowledged_writes_survive_a_member_and_its_disk(mirrored: Cluster) -> None:
    cluster = mirrored
    s3 = cluster.clients
    s3[0].create_bucket(Bucket=BUCKET)
    # about 40 KB per member, 20 s of flushing: most still dirty however slow the PUTs
    written = {f"obj-{i:03d}": os.urandom(512 + i) for i in range(200)}

    def put(item: tuple[int, tuple[str, bytes]]) -> None:
        index, (key, body) = item
        s3[index % 3].put_object(Bucket=BUCKET, Key=key, Body=body)

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        list(pool.map(put, enumerate(written.items())))
    victim = 1
    theirs = [k for k in written if cluster.owner(BUCKET, k) == victim]
    assert theirs and cluster.status(victim)["dirty_objects"] > len(theirs) // 4
    copies = [cluster.view(n)["mirror_copies"] for n in range(3)]
    assert all(copies), copies  # every member mirrors the others' unflushed writes

    cluster.nodes[victim].kill()
    shutil.rmtree(cluster.root / f"node{victim}")
    survivors = [n for n in range(3) if n != victim]
    with pytest.raises(ClientError) as refused:  # until its lease expires
        s3[survivors[0]].get_object(Bucket=BUCKET, Key=theirs[0])
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert "retry-after" in refused.value.response["ResponseMetadata"]["HTTPHeaders"]
    _wait_gone(cluster, victim)
    for node in survivors:  # listings show the dead member's unflushed writes
        listed = s3[node].list_objects_v2(Bucket=BUCKET)["Contents"]
        assert {o["Key"]: o["Size"] for o in listed} == {k: len(b) for k, b in written.items()}
    for index, (key, body) in enumerate(written.items()):
        assert _read(cluster, survivors[index % 2], key) == body, key

    # writes of the dead member's keys go on (under a newer revision) through the others
    rewritten = {key: b"rewritten " + key.encode() for key in theirs[:10]}
    for key, body in rewritten.items():
        s3[survivors[0]].put_object(Bucket=BUCKET, Key=key, Body=body)
    s3[survivors[1]].delete_object(Bucket=BUCKET, Key=theirs[10])
    expected = {**written, **rewritten}
    del expected[theirs[10]]

    # the member comes back with an empty data directory and gets its keys back
    cluster.nodes[victim].start()
    cluster.clients[victim] = make_client(cluster.nodes[victim].endpoint)
    cluster.wait_members([0, 1, 2])
    for index, (key, body) in enumerate(expected.items()):
        assert _read(cluster, index % 3, key) == body, key
    with pytest.raises(ClientError) as info:
        s3[survivors[0]].head_object(Bucket=BUCKET, Key=theirs[10])
    assert info.value.response["Error"]["Code"] == "404"

    for node in range(3):
        done = run_sync(cluster.nodes[node], timeout=180)
        assert done.returncode == 0, done.stderr
    shared = cluster.root / "shared" / BUCKET
    on_backend = {p.name: p.read_bytes() for p in shared.iterdir() if p.is_file()}
    assert {k: on_backend.get(k) for k in expected} == expected
    assert theirs[10] not in on_backend
    _settle_mirrors(cluster)


def _settle_mirrors(cluster: Cluster, timeout: float = 20.0) -> None:
    """Once everything is flushed, the mirrors drop their copies."""
    deadline = time.monotonic() + timeout
    while True:
        left = [cluster.view(n)["mirror_copies"] for n in range(3)]
        if not any(left):
            return
        assert time.monotonic() < deadline, left
        time.sleep(0.2)


def test_one_replica_keeps_the_keys_of_a_dead_member_unavailable(
        tmp_path: Path, etcd: EtcdServer) -> None:
    """Without copies a member that acknowledged writes is *held*: when its lease ends
    its keys wait for it (503, the log naming it) instead of moving; back with its data directory,
    it serves them as they were."""
    cluster = Cluster(tmp_path, args=(*THROTTLED, "--dirty-replicas", "1"),
                      coordinator=etcd.url).start()
    try:
        s3 = cluster.clients
        s3[0].create_bucket(Bucket=BUCKET)
        key = cluster.key_owned_by(2, BUCKET)
        s3[0].put_object(Bucket=BUCKET, Key=key, Body=b"only on its owner")
        assert cluster.view(0)["mirror_copies"] == cluster.view(1)["mirror_copies"] == 0
        cluster.nodes[2].kill()
        deadline = time.monotonic() + 20
        while not any(m["state"] == "held" for m in cluster.view(0)["members"]):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for node in (0, 1):
            with pytest.raises(ClientError) as info:
                s3[node].get_object(Bucket=BUCKET, Key=key)
            assert info.value.response["Error"]["Code"] == "ServiceUnavailable"
            assert info.value.response["ResponseMetadata"]["HTTPHeaders"]["retry-after"]
            # the member it waits for is named in the log, not to clients
            assert cluster.urls[2] not in info.value.response["Error"]["Message"]
            assert cluster.urls[2] in cluster.nodes[node].log()
        cluster.nodes[2].start()
        cluster.wait_members([0, 1, 2])
        for node in range(3):
            assert _read(cluster, node, key) == b"only on its owner"
    finally:
        _stop(cluster)


def test_a_returning_owner_does_not_resurrect_what_others_wrote(mirrored: Cluster) -> None:
    """Killed with its disk kept: once its lease has expired its keys are rewritten
    elsewhere (a newer revision); back, it drops its older unflushed records (the others
    hold its keys' newest states), gets the newer state handed over, and the backend
    ends with it."""
    cluster = mirrored
    s3 = cluster.clients
    s3[0].create_bucket(Bucket=BUCKET)
    changed, kept = (cluster.key_owned_by(1, BUCKET, prefix=p) for p in ("changed", "kept"))
    # 16 KiB take 8 s to flush: the old version is unflushed when its owner dies; back,
    # its flusher may take it again before the member may flush, and must not write it
    s3[0].put_object(Bucket=BUCKET, Key=changed, Body=b"old" * 5461)
    s3[2].put_object(Bucket=BUCKET, Key=kept, Body=b"kept")
    # (with --workers N each worker has its share of the throttle: the 4-byte write
    # may be flushed already by another worker than the one flushing the 16 KiB)
    assert cluster.status(1)["dirty_objects"] >= (2 if cluster.nodes[1].workers == 1 else 1)
    cluster.nodes[1].kill()
    _wait_gone(cluster, 1)
    s3[2].put_object(Bucket=BUCKET, Key=changed, Body=b"new")
    assert _read(cluster, 0, changed) == b"new"

    cluster.nodes[1].start()
    cluster.clients[1] = make_client(cluster.nodes[1].endpoint)
    cluster.wait_members([0, 1, 2])
    assert "starts anew in the cluster" in cluster.nodes[1].log_path.read_text()
    for node in range(3):
        assert _read(cluster, node, changed) == b"new"
        assert _read(cluster, node, kept) == b"kept"
    for node in range(3):
        done = run_sync(cluster.nodes[node], timeout=180)
        assert done.returncode == 0, done.stderr
    shared = cluster.root / "shared" / BUCKET
    assert (shared / changed).read_bytes() == b"new"
    assert (shared / kept).read_bytes() == b"kept"
