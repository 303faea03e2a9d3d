"""Live membership: a member added and one removed while the others keep running.

Real members over one shared posix directory; the backend is throttled and flushes only
what is hurried (a hand-off, a sync), so writes stay unflushed in their owner's cache
until they move. A thread does PUT/GET pairs through a member that stays during every
change and checks read-after-write."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from tests.conftest import make_client
from tests.gateway.cluster.conftest import SECRET, Cluster
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess, free_port, run_sync

# A slow backend (16 objects of 512 B a second): most writes are still unflushed in their
# owner's cache when a change starts, and the hand-off has to flush them.
ARGS = ("--dirty-replicas", "1", "--backend-bandwidth", "8KB/s", "--cache-admission", "cache",
        "--inactivity-delay", "3600")


def squall(*args: str, access_key: str = ACCESS_KEY,
           secret_key: str = SECRET_KEY) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_", "AWS_"))}
    env.update(SQUALL_ACCESS_KEY=access_key, SQUALL_SECRET_KEY=secret_key)
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True,
                          text=True, timeout=300, check=False, env=env)


def body(key: str, n: int = 0) -> bytes:
    return hashlib.sha256(f"{key}/{n}".encode()).digest() * 16  # 512 B


class Writer(threading.Thread):
    """PUT then GET of its own keys through one member, checking each read."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        super().__init__(daemon=True)
        self.s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                               aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                               config=Config(retries={"max_attempts": 10, "mode": "standard"},
                                             s3={"addressing_style": "path"}))
        self.bucket = bucket
        self.acked: dict[str, bytes] = {}
        self.errors: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.halt.is_set():
            key = f"live/{n % 40}"
            data = body(key, n)
            n += 1
            try:
                self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)
                self.acked[key] = data
                got = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            except Exception as exc:  # noqa: BLE001  a refusal is allowed, a stale read not
                self.errors.append(f"{key}: {exc}")
                continue
            if got != data:
                self.errors.append(f"{key}: stale read after write")
                self.halt.set()

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)
        assert not [e for e in self.errors if "stale" in e], self.errors


def view(endpoint: str) -> dict[str, Any]:
    return httpx.get(f"{endpoint}/_squall/cluster").json()  # type: ignore[no-any-return]


def check_all(endpoints: list[str], bucket: str, expected: dict[str, bytes]) -> None:
    for endpoint in endpoints:
        s3 = make_client(endpoint)
        for key, data in expected.items():
            got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            assert got == data, (endpoint, key)


def check_backend(root: Path, bucket: str, expected: dict[str, bytes]) -> None:
    shared = root / "shared"
    for key, data in expected.items():
        found = [p for p in shared.rglob("*") if p.is_file() and p.read_bytes() == data]
        assert found, f"{key} did not reach the backend"


EXTRA: list[SquallProcess] = []


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, size=2, args=ARGS).start()
    yield cluster
    for node in [*cluster.nodes, *EXTRA]:
        if node.proc is not None and node.proc.poll() is None:
            node.stop()
    EXTRA.clear()


def joiner(cluster: Cluster) -> SquallProcess:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    node = SquallProcess(cluster.root / "node-new", [
        "--backend", f"posix:{cluster.root / 'shared'}",
        "--peers", ",".join([*cluster.urls, url]), "--node-id", str(len(cluster.urls)),
        "--join", "--min-part-size", "1024", *ARGS],
        env={"SQUALL_CLUSTER_SECRET": SECRET}, port=port).start()
    EXTRA.append(node)
    return node


def test_a_member_is_added_and_one_removed_live(pair: Cluster) -> None:
    cluster = pair
    bucket = f"m-{uuid.uuid4().hex[:10]}"
    cluster.clients[0].create_bucket(Bucket=bucket)
    written = {f"before/{i}": body(f"before/{i}") for i in range(60)}
    for i, (key, data) in enumerate(written.items()):
        cluster.clients[i % 2].put_object(Bucket=bucket, Key=key, Body=data)
    flushed = [p for p in (cluster.root / "shared" / bucket).rglob("*") if p.is_file()]
    assert len(flushed) < len(written) / 2, "the backend took the writes too soon"

    new = joiner(cluster)
    refused = make_client(new.endpoint)
    with pytest.raises(Exception, match="not joined the cluster yet"):
        refused.get_object(Bucket=bucket, Key="before/0")

    writer = Writer(cluster.nodes[0].endpoint, bucket)
    writer.start()
    time.sleep(0.5)
    added = squall("cluster", "add", new.endpoint,
                   "--endpoint", cluster.nodes[1].endpoint)
    assert added.returncode == 0, (added.stderr, new.log())
    assert "membership 1:" in added.stdout
    time.sleep(0.5)
    for i in range(30):
        key = f"after-add/{i}"
        written[key] = body(key)
        make_client(new.endpoint).put_object(Bucket=bucket, Key=key, Body=written[key])
    writer.stop()
    written.update(writer.acked)

    members = [n.endpoint for n in (*cluster.nodes, new)]
    for endpoint in members:
        seen = view(endpoint)
        assert len(seen["members"]) == 3 and seen["membership_version"] == 1, seen
    assert any(m["url"] == new.endpoint for m in view(members[0])["members"])
    check_all(members, bucket, written)

    # Remove member 1 live while the writer goes on through member 0.
    writer = Writer(cluster.nodes[0].endpoint, bucket)
    writer.start()
    time.sleep(0.5)
    removed = squall("cluster", "remove", cluster.nodes[1].endpoint,
                     "--endpoint", new.endpoint)
    assert removed.returncode == 0, removed.stderr
    time.sleep(0.5)
    writer.stop()
    written.update(writer.acked)
    remaining = [cluster.nodes[0].endpoint, new.endpoint]
    for endpoint in remaining:
        assert [m["url"] for m in view(endpoint)["members"]] == remaining
    check_all(remaining, bucket, written)
    left = make_client(cluster.nodes[1].endpoint)
    with pytest.raises(Exception, match="has left the cluster"):
        left.get_object(Bucket=bucket, Key="before/0")

    for node in (cluster.nodes[0], new):
        done = run_sync(node, timeout=180)
        assert done.returncode == 0, done.stderr
    check_backend(cluster.root, bucket, {k: written[k] for k in list(written)[:20]})
    check_all(remaining, bucket, written)

    # A member that restarts keeps the committed list (saved in its data directory).
    new.stop()
    new.start()
    assert [m["url"] for m in view(new.endpoint)["members"]] == remaining
    check_all([new.endpoint], bucket, written)


def test_bad_membership_changes_get_clear_errors(pair: Cluster) -> None:
    cluster = pair
    endpoint = cluster.nodes[0].endpoint
    bad = squall("cluster", "add", "ftp://nowhere", "--endpoint", endpoint)
    assert bad.returncode == 2 and "must look like http://HOST:PORT" in bad.stderr
    assert bad.stderr.count("\n") == 1

    twice = squall("cluster", "add", cluster.urls[1], "--endpoint", endpoint)
    assert twice.returncode == 1 and "is already a member" in twice.stderr

    unknown = squall("cluster", "remove", "http://127.0.0.1:1", "--endpoint", endpoint)
    assert unknown.returncode == 1 and "is not a member" in unknown.stderr

    gone = squall("cluster", "add", f"http://127.0.0.1:{free_port()}", "--endpoint", endpoint)
    assert gone.returncode == 1 and "aborted, the member list is unchanged" in gone.stderr
    assert view(endpoint)["membership_version"] == 0
    cluster.clients[0].create_bucket(Bucket="still-serving")  # the freeze was lifted

    user = squall("user", "add", "bob", "--endpoint", endpoint, "--json")
    assert user.returncode == 0, user.stderr
    bob = json.loads(user.stdout)
    denied = squall("cluster", "remove", cluster.urls[1], "--endpoint", endpoint,
                    access_key=bob["access_key"], secret_key=bob["secret_key"])
    assert denied.returncode == 1 and "Only the admin may change the cluster" in denied.stderr

    # Down to one member, then the last one cannot go.
    removed = squall("cluster", "remove", cluster.urls[1], "--endpoint", endpoint)
    assert removed.returncode == 0, removed.stderr
    last = squall("cluster", "remove", cluster.urls[0], "--endpoint", endpoint)
    assert last.returncode == 1 and "cannot remove the last member" in last.stderr


def test_membership_changes_need_one_dirty_replica(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, size=2).start()  # default: mirrored write-back (R = 2)
    try:
        refused = squall("cluster", "add", f"http://127.0.0.1:{free_port()}",
                         "--endpoint", cluster.nodes[0].endpoint)
        assert refused.returncode == 1 and "--dirty-replicas 1" in refused.stderr
    finally:
        cluster.stop()


def test_a_member_that_missed_a_change_adopts_it_from_the_others(pair: Cluster) -> None:
    """Member 1 comes back with a new disk (no saved member list) and the old --peers:
    the others report a newer membership version and it adopts their list."""
    cluster = pair
    new = joiner(cluster)
    added = squall("cluster", "add", new.endpoint, "--endpoint", cluster.nodes[0].endpoint)
    assert added.returncode == 0, added.stderr
    assert run_sync(cluster.nodes[1]).returncode == 0
    cluster.nodes[1].stop()
    (cluster.nodes[1].data_dir / "cluster-members.json").unlink()
    cluster.nodes[1].start()
    deadline = time.monotonic() + 30
    while view(cluster.nodes[1].endpoint)["membership_version"] != 1:
        assert time.monotonic() < deadline, cluster.nodes[1].log()
        time.sleep(0.2)
    members = [n.endpoint for n in (*cluster.nodes, new)]
    assert [m["url"] for m in view(cluster.nodes[1].endpoint)["members"]] == members
    bucket = f"a-{uuid.uuid4().hex[:10]}"
    make_client(cluster.nodes[1].endpoint).create_bucket(Bucket=bucket)
    written = {f"k{i}": body(f"k{i}") for i in range(12)}
    for key, data in written.items():
        make_client(cluster.nodes[1].endpoint).put_object(Bucket=bucket, Key=key, Body=data)
    check_all(members, bucket, written)
