"""Live membership: a member added and one removed while the others keep running.

Real members over one shared posix directory; the backend is throttled and flushes only
what is hurried (a hand-off, a sync), so writes stay unflushed in their owner's cache
until they move. A thread does PUT/GET pairs through a member that stays during every
change and checks read-after-write. With ``--dirty-replicas 1`` and with mirrored
write-back (``--dirty-replicas 2``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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
SLOW = ("--backend-bandwidth", "8KB/s", "--cache-admission", "cache",
        "--inactivity-delay", "3600")
# Members of one process each: members running --workers N are not changed live.
ARGS = ("--dirty-replicas", "1", "--workers", "1", *SLOW)
MIRRORED = ("--dirty-replicas", "2", "--workers", "1", *SLOW)


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
    stored = {p.read_bytes() for p in shared.rglob("*") if p.is_file()}
    for key, data in expected.items():
        assert data in stored, f"{key} did not reach the backend"


def wait_health(endpoint: str, url: str, health: str, timeout: float = 30.0) -> None:
    """Wait until the member at ``endpoint`` reports ``health`` for member ``url``."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {m["url"]: m["health"] for m in view(endpoint)["members"]}
        if seen.get(url) == health:
            return
        assert time.monotonic() < deadline, seen
        time.sleep(0.2)


def mirror_copies(data_dir: Path) -> int:
    return len(list((data_dir / "mirror").glob("*.mir")))


EXTRA: list[SquallProcess] = []


@pytest.fixture(params=[ARGS])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, size=2, args=request.param).start()
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
        "--join", "--min-part-size", "1024", *cluster.args],
        env={"SQUALL_CLUSTER_SECRET": SECRET}, port=port).start()
    EXTRA.append(node)
    return node


def add_then_remove(cluster: Cluster, bucket: str
                    ) -> tuple[dict[str, bytes], SquallProcess, list[str]]:
    """Two members over a slow backend: add a third while a writer goes on through
    member 0, then remove member 1 the same way; check every acknowledged object
    through every remaining member, and on the backend after ``squall sync``. The
    objects written, the added member, the remaining endpoints."""
    cluster.clients[0].create_bucket(Bucket=bucket)
    written = {f"before/{i}": body(f"before/{i}") for i in range(60)}
    for i, (key, data) in enumerate(written.items()):
        cluster.clients[i % 2].put_object(Bucket=bucket, Key=key, Body=data)
    flushed = [p for p in (cluster.root / "shared" / bucket).rglob("*") if p.is_file()]
    # (16 a second: on a loaded machine the writes themselves take about as long)
    assert len(flushed) < len(written) * 3 / 4, "the backend took the writes too soon"

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
    # The removed member forwards its clients' requests to the members that remain.
    left = make_client(cluster.nodes[1].endpoint)
    assert view(cluster.nodes[1].endpoint)["membership"] == "left"
    assert [m["url"] for m in view(cluster.nodes[1].endpoint)["members"]] == remaining
    for i in range(6):
        key = f"via-removed/{i}"
        written[key] = body(key)
        left.put_object(Bucket=bucket, Key=key, Body=written[key])
    check_all([cluster.nodes[1].endpoint, *remaining], bucket, written)
    listed = left.list_objects_v2(Bucket=bucket, Prefix="via-removed/")["Contents"]
    assert sorted(o["Key"] for o in listed) == [f"via-removed/{i}" for i in range(6)]

    for node in (cluster.nodes[0], new):
        done = run_sync(node, timeout=180)
        assert done.returncode == 0, done.stderr
    check_backend(cluster.root, bucket, written)
    check_all(remaining, bucket, written)
    return written, new, remaining


def test_a_member_is_added_and_one_removed_live(pair: Cluster) -> None:
    bucket = f"m-{uuid.uuid4().hex[:10]}"
    written, new, remaining = add_then_remove(pair, bucket)

    # A member that restarts keeps the committed list (saved in its data directory).
    new.stop()
    new.start()
    assert [m["url"] for m in view(new.endpoint)["members"]] == remaining
    check_all([new.endpoint], bucket, written)
    removed = pair.nodes[1]  # and a removed one still forwards
    removed.stop()
    removed.start()
    check_all([removed.endpoint], bucket, written)


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


@pytest.mark.parametrize("pair", [MIRRORED], indirect=True)
def test_mirrored_members_are_added_and_removed_live(pair: Cluster) -> None:
    """With --dirty-replicas 2 the hand-off flushes every unflushed write and drops the
    mirror copies before the members are renumbered; writes made after the changes are
    mirrored again under the new list: they survive a member and its disk."""
    cluster = pair
    for node in range(2):  # a member not yet seen up keeps its keys for a while
        cluster.wait_health(node, ["up"] * 2)
    bucket = f"r-{uuid.uuid4().hex[:10]}"
    written, new, remaining = add_then_remove(cluster, bucket)
    assert "mirror copies of flushed writes dropped" in new.log_path.read_text()

    # 4 KiB each, two a second through the slow backend: copies are still held below
    after = {f"after/{i}": body(f"after/{i}") * 8 for i in range(24)}
    for i, (key, data) in enumerate(after.items()):
        make_client(remaining[i % 2]).put_object(Bucket=bucket, Key=key, Body=data)
    assert mirror_copies(cluster.nodes[0].data_dir) and mirror_copies(new.data_dir)

    # The added member dies with its disk: member 0 serves its writes from the copies.
    new.kill()
    shutil.rmtree(new.data_dir)
    wait_health(remaining[0], new.endpoint, "down")
    check_all(remaining[:1], bucket, {**written, **after})
    assert "takes over the keys" in cluster.nodes[0].log_path.read_text()


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


def wait_members(endpoint: str, members: list[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while [m["url"] for m in view(endpoint)["members"]] != members:
        assert time.monotonic() < deadline, view(endpoint)
        time.sleep(0.2)


def test_members_follow_a_watched_member_file(tmp_path: Path) -> None:
    """--peers-file, as the Helm chart runs it: one member; a second started from a file
    that lists both joins (the first sees the file and adds it), and the two mirror each
    other's writes (R = 2 by default with a member file); then the first is left out of
    the file and removed: it hands everything off and forwards."""
    members = tmp_path / "members"
    cluster = Cluster(tmp_path, size=1, args=SLOW, peers_file=members).start()
    EXTRA.clear()
    try:
        bucket = f"f-{uuid.uuid4().hex[:10]}"
        cluster.clients[0].create_bucket(Bucket=bucket)
        written = {f"k{i}": body(f"k{i}") for i in range(20)}
        for key, data in written.items():
            cluster.clients[0].put_object(Bucket=bucket, Key=key, Body=data)

        port = free_port()
        second = f"http://127.0.0.1:{port}"
        members.write_text(f"{cluster.urls[0]}  # the first pod\n{second}\n")
        new = SquallProcess(tmp_path / "node1", [
            "--backend", f"posix:{tmp_path / 'shared'}", "--peers-file", str(members),
            "--node-id", "1", "--min-part-size", "1024", *SLOW],
            env={"SQUALL_CLUSTER_SECRET": SECRET}, port=port).start()
        EXTRA.append(new)
        both = [cluster.urls[0], second]
        for endpoint in both:
            wait_members(endpoint, both)
        assert "it joins them" in new.log_path.read_text()
        wait_health(second, cluster.urls[0], "up")
        for i in range(20):
            key = f"after/{i}"
            written[key] = body(key) * 8  # 4 KiB: still unflushed (and mirrored) below
            make_client(both[i % 2]).put_object(Bucket=bucket, Key=key, Body=written[key])
        assert mirror_copies(cluster.nodes[0].data_dir) and mirror_copies(new.data_dir)
        check_all(both, bucket, written)

        members.write_text(f"{second}\n")  # the first member goes
        wait_members(second, [second])
        assert view(cluster.urls[0])["membership"] == "left"
        check_all([second, cluster.urls[0]], bucket, written)
        done = run_sync(new, timeout=180)
        assert done.returncode == 0, done.stderr
        check_backend(tmp_path, bucket, written)
    finally:
        for node in [*cluster.nodes, *EXTRA]:
            if node.proc is not None and node.proc.poll() is None:
                node.stop()
        EXTRA.clear()


def backend_state(root: Path, bucket: str, keys: list[str]) -> dict[str, bytes | None]:
    """What the shared posix backend holds as the current version of each key."""
    found: dict[str, bytes | None] = {}
    for key in keys:
        path = root / "shared" / bucket / key
        found[key] = path.read_bytes() if path.is_file() else None
    return found


def test_a_mirrored_member_that_is_down_is_removed_live(tmp_path: Path) -> None:
    """3 members, --dirty-replicas 2, 200 objects written through every member; one is
    SIGKILLed and its data directory taken away, then removed live through a survivor
    while a writer goes on: the survivors flush its writes from their mirror copies.
    Started again later with its old data directory, it leaves and drops its stale
    unflushed records instead of flushing them over newer data."""
    cluster = Cluster(tmp_path, size=3, args=MIRRORED).start()
    try:
        for node in range(3):  # a member not yet seen up keeps its keys for a while
            cluster.wait_health(node, ["up"] * 3)
        bucket = f"d-{uuid.uuid4().hex[:10]}"
        cluster.clients[0].create_bucket(Bucket=bucket)
        written = {f"obj-{i:03d}": body(f"obj-{i:03d}") for i in range(200)}
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda item: cluster.clients[item[0] % 3].put_object(
                Bucket=bucket, Key=item[1][0], Body=item[1][1]), enumerate(written.items())))
        victim, survivors = 2, [cluster.urls[0], cluster.urls[1]]
        theirs = [k for k in written if cluster.owner(bucket, k) == victim]
        assert cluster.status(victim)["dirty_objects"] > len(theirs) // 4

        cluster.nodes[victim].kill()
        old_dir = tmp_path / "node2-old"
        cluster.nodes[victim].data_dir.rename(old_dir)  # its disk is gone (kept aside)
        for node in (0, 1):
            cluster.wait_health(node, ["up", "up", "down"])
        writer = Writer(survivors[0], bucket)
        writer.start()
        time.sleep(0.5)
        removed = squall("cluster", "remove", cluster.urls[victim],
                         "--endpoint", survivors[1])
        assert removed.returncode == 0, removed.stderr
        time.sleep(0.5)
        writer.stop()
        written.update(writer.acked)
        for endpoint in survivors:
            assert [m["url"] for m in view(endpoint)["members"]] == survivors
        assert any("taken over" in cluster.nodes[n].log_path.read_text() for n in (0, 1))
        check_all(survivors, bucket, written)

        # The dead member's keys are written again under the new list.
        rewritten = {key: b"rewritten " + key.encode() for key in theirs[:20]}
        for i, (key, data) in enumerate(rewritten.items()):
            make_client(survivors[i % 2]).put_object(Bucket=bucket, Key=key, Body=data)
        written.update(rewritten)
        for node in (0, 1):
            done = run_sync(cluster.nodes[node], timeout=180)
            assert done.returncode == 0, done.stderr
        assert backend_state(tmp_path, bucket, list(written)) == written

        # Back with its old data directory: it finds itself removed, drops what it held.
        shutil.rmtree(cluster.nodes[victim].data_dir, ignore_errors=True)
        old_dir.rename(cluster.nodes[victim].data_dir)
        cluster.nodes[victim].start()
        assert view(cluster.urls[victim])["membership"] == "left"
        assert "unflushed records it held are dropped" in \
            cluster.nodes[victim].log_path.read_text()
        assert cluster.status(victim)["dirty_objects"] == 0
        check_all([*survivors, cluster.urls[victim]], bucket, written)
        for node in (0, 1):
            assert run_sync(cluster.nodes[node], timeout=180).returncode == 0
        assert backend_state(tmp_path, bucket, list(written)) == written
    finally:
        for node in cluster.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.stop()


def test_a_member_that_is_down_without_copies_needs_force(pair: Cluster) -> None:
    """--dirty-replicas 1: the unflushed writes of a member that is down exist only on
    its disk; removing it is refused unless --force, which gives them up (it drops them
    when it comes back instead of flushing them over newer writes)."""
    cluster = pair
    bucket = f"o-{uuid.uuid4().hex[:10]}"
    cluster.clients[0].create_bucket(Bucket=bucket)
    key = cluster.key_owned_by(1, bucket)
    cluster.clients[0].put_object(Bucket=bucket, Key=key, Body=b"only on member 1")
    cluster.nodes[1].kill()
    wait_health(cluster.urls[0], cluster.urls[1], "down")

    unknown = squall("cluster", "remove", "http://127.0.0.1:1", "--endpoint", cluster.urls[0])
    assert unknown.returncode == 1 and "is not a member" in unknown.stderr
    refused = squall("cluster", "remove", cluster.urls[1], "--endpoint", cluster.urls[0])
    assert refused.returncode == 1, refused.stdout
    assert "its unflushed writes would be lost" in refused.stderr
    assert "--force" in refused.stderr and refused.stderr.count("\n") == 1
    assert view(cluster.urls[0])["membership_version"] == 0

    forced = squall("cluster", "remove", cluster.urls[1], "--endpoint", cluster.urls[0],
                    "--force")
    assert forced.returncode == 0, forced.stderr
    assert [m["url"] for m in view(cluster.urls[0])["members"]] == cluster.urls[:1]
    cluster.clients[0].put_object(Bucket=bucket, Key=key, Body=b"newer")

    cluster.nodes[1].start()  # its old data directory: the old write is dropped
    assert view(cluster.urls[1])["membership"] == "left"
    assert cluster.status(1)["dirty_objects"] == 0
    assert run_sync(cluster.nodes[0], timeout=180).returncode == 0
    assert backend_state(cluster.root, bucket, [key]) == {key: b"newer"}
    check_all(cluster.urls, bucket, {key: b"newer"})
