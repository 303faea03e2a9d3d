"""The distributed MinIO of ``python -m loadtests.minio`` behind a Squall gateway.

Four MinIO nodes x two drives (erasure-coded, write quorum 5 of 8 drives), each in a
network and a mount namespace of its own; Squall (``--backend 's3:...?bucket=...'``, with
its cache tier) and its client run in the cluster's client namespace, on that namespace's
loopback. One MinIO node is killed while writes continue: every acknowledged object is
listed and read back through Squall, and is in MinIO once Squall has flushed; no object
there is a path prefix of another. With the cache tier, writes go on and flushes proceed
while the node is dead (the cache drains before any ``squall sync``) and the health stays
ok (the erasure coding answers). The node is then started again on its drives: every
object is still there, read through the restarted node itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadtests.minio.cluster import MinioCluster, unavailable
from loadtests.minio.install import missing_reason
from tests.support.server import ACCESS_KEY, SECRET_KEY

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SHARED = "squall-store"
PORT = 9500
WRITES = 240
KILL_AFTER = 60
#: seconds the store stays cut off (SQUALL_TEST_OUTAGE_S=60 for the full minute)
OUTAGE_S = float(os.environ.get("SQUALL_TEST_OUTAGE_S", "15"))

#: Writes WRITES objects through Squall (argv: endpoint, ack file, signal file); each
#: acknowledged key is appended to the ack file at once; the signal file appears after
#: KILL_AFTER acknowledgements. Failed writes (not acknowledged) are counted, not fatal.
WRITER = r"""
import hashlib, json, random, sys, boto3
from botocore.config import Config
endpoint, acks, signal_file, writes, kill_after, access, secret = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access,
                  aws_secret_access_key=secret, region_name="us-east-1",
                  config=Config(retries={"max_attempts": 1}, read_timeout=60))
s3.create_bucket(Bucket="ckpt")
failed = 0
with open(acks, "a") as out:
    for i in range(int(writes)):
        key = f"rank{i % 4}/step{i:05d}"
        body = random.Random(i).randbytes(64 * 1024 + i)
        try:
            s3.put_object(Bucket="ckpt", Key=key, Body=body)
        except Exception as exc:
            failed += 1
            print("failed", key, exc, file=sys.stderr)
            continue
        out.write(json.dumps([key, hashlib.md5(body).hexdigest()]) + "\n")
        out.flush()
        if i + 1 - failed == int(kill_after):
            open(signal_file, "w").close()
print(json.dumps({"failed": failed}))
"""

#: Lists the bucket through Squall and reads every acknowledged key through Squall and
#: straight from MinIO (argv: squall endpoint, minio endpoint, ack file, ...); prints what
#: is missing or wrong.
VERIFIER = r"""
import hashlib, json, sys, boto3
squall, minio, acks, shared, access, secret, up_access, up_secret = sys.argv[1:]
def client(url, a, s):
    return boto3.client("s3", endpoint_url=url, aws_access_key_id=a,
                        aws_secret_access_key=s, region_name="us-east-1")
front, back = client(squall, access, secret), client(minio, up_access, up_secret)
acked = dict(json.loads(line) for line in open(acks))
listed = {o["Key"] for page in front.get_paginator("list_objects_v2").paginate(Bucket="ckpt")
          for o in page.get("Contents", [])}
stored = {o["Key"] for page in back.get_paginator("list_objects_v2").paginate(Bucket=shared)
          for o in page.get("Contents", [])}
def md5(body):
    return hashlib.md5(body.read()).hexdigest()
print(json.dumps({
    "acked": len(acked),
    "not_listed": sorted(set(acked) - listed),
    "bad_reads": sorted(k for k, m in acked.items()
                        if md5(front.get_object(Bucket="ckpt", Key=k)["Body"]) != m),
    "not_in_minio": sorted(k for k in acked if "ckpt/" + k not in stored),
    "bad_in_minio": sorted(k for k, m in acked.items() if "ckpt/" + k in stored
                           and md5(back.get_object(Bucket=shared, Key="ckpt/" + k)["Body"]) != m),
    "prefix_objects": sorted(k for k in stored if any(o.startswith(k + "/") for o in stored)),
}))
"""

#: The gateway's status and health (argv: squall endpoint), as one JSON line.
STATUS = r"""
import json, sys, urllib.error, urllib.request
def get(path):
    try:
        with urllib.request.urlopen(sys.argv[1] + path, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)
_, status = get("/_squall/status?workers=all")
workers = status.get("workers", [status])  # each worker's counters are its own
code, health = get("/_squall/health")
print(json.dumps({"flushes_total": sum(w.get("flushes_total", 0) for w in workers),
                  "dirty_objects": sum(w.get("dirty_objects", 0) for w in workers),
                  "health": code,
                  "health_body": health}))
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MinioCluster]:
    reason = unavailable() or missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with MinioCluster(tmp_path / "minio", ACCESS_KEY, SECRET_KEY) as started:
        yield started


def gateway_state(cluster: MinioCluster, squall_url: str) -> dict[str, Any]:
    """Flushes done, records unflushed and the health of the gateway in the client
    namespace."""
    done = python_in(cluster, STATUS, squall_url, timeout=60)
    assert done.returncode == 0, done.stderr
    state: dict[str, Any] = json.loads(done.stdout)
    return state


def python_in(cluster: MinioCluster, script: str, *args: str,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    assert cluster.client is not None
    return cluster.client.run([sys.executable, "-c", script, *args], capture_output=True,
                              text=True, timeout=timeout, env=cluster.client_env())


SQUALL_URL = f"http://127.0.0.1:{PORT}"
#: creates a bucket (argv: endpoint, access, secret, bucket)
MAKE_BUCKET = ("import sys, boto3; boto3.client('s3', endpoint_url=sys.argv[1], "
               "aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], "
               "region_name='us-east-1').create_bucket(Bucket=sys.argv[4])")


def squall_env(cluster: MinioCluster) -> dict[str, str]:
    return {**cluster.client_env(), "SQUALL_PUBLIC_STATUS": "true",
            "SQUALL_ACCESS_KEY": ACCESS_KEY, "SQUALL_SECRET_KEY": SECRET_KEY,
            "SQUALL_UPSTREAM_ACCESS_KEY": ACCESS_KEY, "SQUALL_UPSTREAM_SECRET_KEY": SECRET_KEY}


def sync_in(cluster: MinioCluster) -> subprocess.CompletedProcess[str]:
    """``squall sync`` against the gateway at SQUALL_URL, from the client namespace."""
    assert cluster.client is not None
    return cluster.client.run([sys.executable, "-m", "gateway.commands.cli", "sync",
                               "--endpoint", SQUALL_URL], env=squall_env(cluster),
                              capture_output=True, text=True, timeout=300, check=False)


@contextlib.contextmanager
def squall_in(cluster: MinioCluster, tmp_path: Path, *args: str,
              backend_options: str = "") -> Iterator[None]:
    """The shared bucket made on MinIO, then a gateway at SQUALL_URL in the client
    namespace in front of it (``args`` added to ``serve``), healthy; stopped by its PID
    at the end."""
    assert cluster.client is not None
    made = python_in(cluster, MAKE_BUCKET, cluster.endpoint, ACCESS_KEY, SECRET_KEY, SHARED)
    assert made.returncode == 0, made.stderr
    env = squall_env(cluster)
    with open(tmp_path / "squall.log", "ab") as log:
        squall = cluster.client.popen(
            [sys.executable, "-m", "gateway.commands.cli", "serve", "--listen",
             f"127.0.0.1:{PORT}", "--data-dir", str(tmp_path / "squall"), "--log-level",
             "warning", "--backend", f"s3:{cluster.endpoint}?bucket={SHARED}{backend_options}",
             *args], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        ready = cluster.client.run([sys.executable, "-m", "loadtests.minio.probe", "60",
                                    f"{SQUALL_URL}/_squall/health"], env=env, check=False)
        assert ready.returncode == 0, (tmp_path / "squall.log").read_text()
        yield
    finally:
        if squall.poll() is None:
            squall.terminate()
            try:
                squall.wait(30)
            except subprocess.TimeoutExpired:
                squall.kill()
                squall.wait()


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_squall_on_distributed_minio_loses_nothing_when_a_node_dies(
        cluster: MinioCluster, tmp_path: Path, cache: bool) -> None:
    """With the cache tier, MinIO receives the flushes (``squall sync`` at the end runs
    them with the node dead); without it, every write goes to MinIO as the node dies."""
    assert cluster.client is not None
    squall_url, env = SQUALL_URL, squall_env(cluster)
    with squall_in(cluster, tmp_path,
                   *(["--inactivity-delay", "5"] if cache else ["--cache-size", "0"])):
        acks, signal_file = tmp_path / "acks.jsonl", tmp_path / "kill-now"
        writer = cluster.client.popen(
            [sys.executable, "-c", WRITER, squall_url, str(acks), str(signal_file),
             str(WRITES), str(KILL_AFTER), ACCESS_KEY, SECRET_KEY],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not signal_file.exists() and writer.poll() is None:
            assert time.monotonic() < deadline, "the writer made no progress"
            time.sleep(0.05)
        cluster.kill(3)  # the fourth node: Squall talks to the first
        at_kill = gateway_state(cluster, squall_url)
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        acked = sum(1 for _ in acks.open())
        assert acked >= KILL_AFTER + (WRITES - KILL_AFTER) // 2, (out, err)
        if cache:  # flushes go on with the node dead: the cache drains without a sync
            deadline = time.monotonic() + 240
            while (state := gateway_state(cluster, squall_url))["dirty_objects"]:
                assert time.monotonic() < deadline, state
                time.sleep(1)
            assert state["flushes_total"] > at_kill["flushes_total"], (at_kill, state)
            assert state["health"] == 200, state
        synced = sync_in(cluster)
        assert synced.returncode == 0, synced.stdout + synced.stderr
        checked = python_in(cluster, VERIFIER, squall_url, cluster.endpoint, str(acks), SHARED,
                            ACCESS_KEY, SECRET_KEY, ACCESS_KEY, SECRET_KEY)
        assert checked.returncode == 0, checked.stderr
        report = json.loads(checked.stdout)
        assert report == {"acked": acked, "not_listed": [], "bad_reads": [],
                          "not_in_minio": [], "bad_in_minio": [], "prefix_objects": []}

        cluster.restart(3)  # on its drives: everything is still there, read through it
        deadline = time.monotonic() + 60  # once it has found its peers again
        while True:
            checked = python_in(cluster, VERIFIER, squall_url, cluster.endpoints[3],
                                str(acks), SHARED, ACCESS_KEY, SECRET_KEY, ACCESS_KEY,
                                SECRET_KEY)
            if checked.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert checked.returncode == 0, checked.stderr
        assert json.loads(checked.stdout) == report


def test_the_launcher_starts_prints_and_stops_everything_on_ctrl_c(tmp_path: Path) -> None:
    reason = unavailable() or missing_reason()
    if reason is not None:
        pytest.skip(reason)
    launcher = subprocess.Popen([sys.executable, "-m", "loadtests.minio", "--work",
                                 str(tmp_path)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    try:
        assert launcher.stdout is not None
        printed = []
        for line in launcher.stdout:
            printed.append(line)
            if line.startswith("Ctrl-C stops everything"):
                break
        text = "".join(printed)
        assert "4 nodes x 2 drives, healthy" in text, text
        assert text.count(":9000") >= 4 and "access key: " in text and "secret key: " in text
        prefix = f"squall-m-{launcher.pid}-"
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                               check=True).stdout
        assert sum(line.startswith(prefix) for line in names.splitlines()) == 6  # 4+client+sw
        launcher.send_signal(signal.SIGINT)
        rest, _ = launcher.communicate(timeout=90)  # read on: a full pipe would block it
        assert launcher.returncode == 0, text + rest
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                               check=True).stdout
        assert prefix not in names
        assert not any((tmp_path / "drives").iterdir())  # bind mounts were private
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


#: PUTs 1 MiB objects through Squall until it answers 503 SlowDown (argv: endpoint, ack
#: file, first index, count or 0 for "until SlowDown", access, secret); acknowledged keys go
#: to the ack file; prints {"slowdown": Retry-After or null, "refused": n}.
FILLER = r"""
import hashlib, json, random, sys, boto3
from botocore.config import Config
from botocore.exceptions import ClientError
endpoint, acks, first, count, access, secret = sys.argv[1:]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=access,
                  aws_secret_access_key=secret, region_name="us-east-1",
                  config=Config(retries={"total_max_attempts": 1}, read_timeout=120))
first, count = int(first), int(count)
refused, slowdown = 0, None
with open(acks, "a") as out:
    for i in range(first, first + (count or 256)):
        key = f"rank{i % 4}/obj{i:04d}"
        body = random.Random(i).randbytes(1024 * 1024)
        try:
            s3.put_object(Bucket="ckpt", Key=key, Body=body)
        except ClientError as exc:
            answer = exc.response
            assert answer["ResponseMetadata"]["HTTPStatusCode"] == 503, answer
            if answer["Error"]["Code"] == "SlowDown":
                slowdown = answer["ResponseMetadata"]["HTTPHeaders"].get("retry-after")
                break
            refused += 1
            continue
        out.write(json.dumps([key, hashlib.md5(body).hexdigest()]) + "\n")
        out.flush()
print(json.dumps({"slowdown": slowdown, "refused": refused}))
"""


@pytest.fixture
def cuttable_cluster(tmp_path: Path) -> Iterator[MinioCluster]:
    reason = unavailable() or missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with MinioCluster(tmp_path / "minio", ACCESS_KEY, SECRET_KEY, faults=True) as started:
        yield started


def test_squall_absorbs_a_network_cut_from_the_whole_store_then_flushes_everything(
        cuttable_cluster: MinioCluster, tmp_path: Path) -> None:
    """nftables drops every packet between Squall's namespace and all four MinIO nodes
    (a black hole: connections hang, nothing is refused) for OUTAGE_S seconds. Squall keeps
    absorbing writes into its 32 MiB cache, then answers 503 SlowDown with Retry-After; its
    health says degraded with a reason that names no address; once the link is back,
    health recovers, ``squall sync`` flushes everything and every acknowledged object is
    in MinIO, byte-identical."""
    cluster = cuttable_cluster
    assert cluster.client is not None
    squall_url = SQUALL_URL
    with squall_in(cluster, tmp_path, "--cache-size", "32MiB", "--backend-probe-interval",
                   "0.5", backend_options="&read_timeout=5"):
        acks = tmp_path / "acks.jsonl"
        made = python_in(cluster, MAKE_BUCKET, squall_url, ACCESS_KEY, SECRET_KEY, "ckpt")
        assert made.returncode == 0, made.stderr
        before = python_in(cluster, FILLER, squall_url, str(acks), "0", "4", ACCESS_KEY,
                           SECRET_KEY)
        assert before.returncode == 0 and json.loads(before.stdout)["refused"] == 0, before

        cluster.cut_client()
        down = time.monotonic()
        filled = python_in(cluster, FILLER, squall_url, str(acks), "4", "0", ACCESS_KEY,
                           SECRET_KEY)
        assert filled.returncode == 0, filled.stderr
        result = json.loads(filled.stdout)
        assert result["slowdown"] is not None and int(result["slowdown"]) >= 1, result
        assert result["refused"] < 3, result  # writes sent past the cache as the link went
        acked = sum(1 for _ in acks.open())
        assert (acked - 4) * 1024 * 1024 >= 16 * 1024 * 1024, f"only {acked - 4} absorbed"

        deadline = time.monotonic() + 60
        while (state := gateway_state(cluster, squall_url))["health"] != 503:
            assert time.monotonic() < deadline, state
            time.sleep(0.5)
        reason = state["health_body"]["reason"]
        assert state["health_body"]["status"] == "degraded", state
        assert reason.startswith("backend unreachable: "), reason
        for secret in (*(n.address for n in cluster.nodes), SHARED, ACCESS_KEY, SECRET_KEY):
            assert secret not in reason, reason
        assert state["dirty_objects"] >= acked - 4, state

        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down)))
        assert gateway_state(cluster, squall_url)["health"] == 503  # still cut off
        cluster.heal_client()
        deadline = time.monotonic() + 120
        while (state := gateway_state(cluster, squall_url))["health"] != 200:
            assert time.monotonic() < deadline, state
            time.sleep(0.5)
        synced = sync_in(cluster)
        assert synced.returncode == 0, synced.stdout + synced.stderr
        checked = python_in(cluster, VERIFIER, squall_url, cluster.endpoint, str(acks), SHARED,
                            ACCESS_KEY, SECRET_KEY, ACCESS_KEY, SECRET_KEY)
        assert checked.returncode == 0, checked.stderr
        assert json.loads(checked.stdout) == {
            "acked": acked, "not_listed": [], "bad_reads": [], "not_in_minio": [],
            "bad_in_minio": [], "prefix_objects": []}
