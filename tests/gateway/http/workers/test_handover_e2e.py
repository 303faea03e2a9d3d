"""``--workers 2`` (connection hand-over is on by default): a request for the other
worker's key moves the client's connection to that worker; the client sees one keep-alive
connection that keeps working, whatever its requests' owners."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.gateway.client.tls.certs import issue, make_ca
from tests.gateway.client.tls.conftest import HttpsSquall
from tests.gateway.http.workers.conftest import (
    SLOW_BACKEND,
    keys_of,
    owner,
    start,
    wait_healthy,
    workers_status,
)
from tests.gateway.http.workers.writers import Writers, check_all, one_attempt_client
from tests.support.raw_http import Connection, signed
from tests.support.server import SquallProcess

NO_HANDOVER = "--no-worker-handover"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    server = start(tmp_path_factory.mktemp("handover"), *SLOW_BACKEND)
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture
def hbucket(gateway: SquallProcess) -> str:
    name = f"h-{uuid.uuid4().hex[:12]}"
    make_client(gateway.endpoint).create_bucket(Bucket=name)
    return name


def handovers(server: SquallProcess) -> list[dict[str, int]]:
    """Each worker's hand-over counters."""
    return [w["worker"]["handover"] for w in workers_status(server)]


def total(server: SquallProcess, field: str) -> int:
    return sum(h[field] for h in handovers(server))


@pytest.fixture
def moved(gateway: SquallProcess) -> Iterator[list[int]]:
    """``moved[0]`` (set by the test): at least that many hand-overs must happen, and
    none may fail."""
    expected = [0]
    before = total(gateway, "sent")
    yield expected
    assert total(gateway, "sent") - before >= expected[0]
    assert total(gateway, "failed") == 0


# -- tests --------------------------------------------------------------------------------

def test_keep_alive_clients_read_their_writes(gateway: SquallProcess, hbucket: str) -> None:
    before = total(gateway, "sent")
    keys = [k for pair in zip(keys_of(0, hbucket, 40), keys_of(1, hbucket, 40), strict=True)
            for k in pair]  # alternating owners: connections move often
    problems: list[str] = []

    def run(n: int) -> None:
        s3 = make_client(gateway.endpoint)
        for i, key in enumerate(keys[20 * n:20 * (n + 1)]):
            body = os.urandom(512 * (i % 9))
            s3.put_object(Bucket=hbucket, Key=key, Body=body)
            got = s3.get_object(Bucket=hbucket, Key=key)["Body"].read()
            if got != body:
                problems.append(f"{key}: read {len(got)} bytes, wrote {len(body)}")
            if i % 3 == 0:
                s3.delete_object(Bucket=hbucket, Key=key)
                try:
                    s3.head_object(Bucket=hbucket, Key=key)
                    problems.append(f"{key}: still there after DELETE")
                except ClientError as exc:
                    if exc.response["Error"]["Code"] != "404":
                        problems.append(f"{key}: {exc}")

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not problems
    counters = handovers(gateway)
    assert total(gateway, "sent") - before > 20
    assert all(h["sent"] > 0 and h["adopted"] > 0 for h in counters), counters
    assert all(h["failed"] == 0 for h in counters), counters


def test_one_connection_moves_back_and_forth(gateway: SquallProcess, hbucket: str) -> None:
    """Requests alternate between the workers' keys on one socket: the connection is
    handed over about every request, and the client never sees it close."""
    before = total(gateway, "sent")
    conn = Connection(gateway)
    try:
        pairs = list(zip(keys_of(0, hbucket, 10), keys_of(1, hbucket, 10), strict=True))
        for a, b in pairs:
            for key in (a, b):
                body = key.encode() * 50
                status, _, _ = conn.request("PUT", f"/{hbucket}/{key}", body)
                assert status == 200
                status, fields, got = conn.request("GET", f"/{hbucket}/{key}")
                assert (status, got) == (200, body)
                assert fields.get("connection") != "close"
        status, _, _ = conn.request("HEAD", f"/{hbucket}/{pairs[0][1]}")
        assert status == 200
        status, _, listing = conn.request("GET", f"/{hbucket}?list-type=2")  # proxied level
        assert status == 200 and pairs[-1][0].encode() in listing
    finally:
        conn.close()
    assert total(gateway, "sent") - before >= 19  # at least every change of owner


def test_a_large_put_handed_over_mid_body(gateway: SquallProcess, hbucket: str,
                                          moved: list[int]) -> None:
    """The head and part of the body are read by one worker, the rest by the owner."""
    moved[0] = 4
    for worker in (0, 1):
        for split in ("head", "body"):
            key = keys_of(worker, hbucket, 1, f"big-{split}")[0]
            body = os.urandom(3 * 1024 * 1024 + 17)
            conn = Connection(gateway)
            try:
                # First the other worker's key, so the connection is surely handed at least
                # once whichever worker the kernel chose; then the large PUT, in pieces.
                other = keys_of(1 - worker, hbucket, 1, "probe")[0]
                assert conn.request("PUT", f"/{hbucket}/{other}", b"p")[0] == 200
                head, payload = signed(gateway, "PUT", f"/{hbucket}/{key}", body)
                if split == "head":  # the head itself in two reads
                    conn.sock.sendall(head[:40])
                    time.sleep(0.05)
                    conn.sock.sendall(head[40:] + payload[:1000])
                else:
                    conn.sock.sendall(head + payload[:300_000])
                time.sleep(0.05)
                conn.sock.sendall(payload[300_000 if split == "body" else 1000:])
                status, fields, _ = conn.read_response("PUT")
                assert status == 200
                assert fields["etag"].strip('"') == hashlib.md5(body).hexdigest()
                status, _, got = conn.request("GET", f"/{hbucket}/{key}")
                assert status == 200 and got == body
            finally:
                conn.close()


def test_a_large_put_in_one_send(gateway: SquallProcess, hbucket: str,
                                 moved: list[int]) -> None:
    """More than one socket read of body arrives before the head is parsed."""
    moved[0] = 2
    s3 = make_client(gateway.endpoint)
    for worker in (0, 1):
        key = keys_of(worker, hbucket, 1, "onesend")[0]
        body = os.urandom(2 * 1024 * 1024)
        conn = Connection(gateway)
        try:
            for probe in (keys_of(1 - worker, hbucket, 1, "q")[0], key):
                status, _, _ = conn.request("PUT", f"/{hbucket}/{probe}", body)
                assert status == 200
        finally:
            conn.close()
        assert s3.get_object(Bucket=hbucket, Key=key)["Body"].read() == body


def test_expect_100_continue(gateway: SquallProcess, hbucket: str,
                             moved: list[int]) -> None:
    moved[0] = 3
    conn = Connection(gateway)
    try:
        for worker in (0, 1, 0, 1):
            key = keys_of(worker, hbucket, 1, f"expect-{worker}")[0]
            body = os.urandom(100_000)
            head, payload = signed(gateway, "PUT", f"/{hbucket}/{key}", body,
                                   {"Expect": "100-continue"})
            conn.sock.sendall(head)
            status, _ = conn.read_head()
            assert status == 100
            conn.sock.sendall(payload)
            status, _, _ = conn.read_response("PUT")
            assert status == 200
            assert conn.request("GET", f"/{hbucket}/{key}")[2] == body
    finally:
        conn.close()
    # boto3 sends Expect: 100-continue for bodies over 1 MiB
    s3 = make_client(gateway.endpoint)
    for key in keys_of(0, hbucket, 2, "boto-expect") + keys_of(1, hbucket, 2, "boto-expect"):
        body = os.urandom(1024 * 1024 + 5)
        s3.put_object(Bucket=hbucket, Key=key, Body=body)
        assert s3.get_object(Bucket=hbucket, Key=key)["Body"].read() == body


def test_pipelined_requests(gateway: SquallProcess, hbucket: str) -> None:
    """Several requests in one send are answered in order, wherever each is served."""
    keys = keys_of(0, hbucket, 3, "pipe") + keys_of(1, hbucket, 3, "pipe")
    s3 = make_client(gateway.endpoint)
    for key in keys:
        s3.put_object(Bucket=hbucket, Key=key, Body=key.encode())
    order = [keys[0], keys[3], keys[4], keys[1], keys[5], keys[2]]
    conn = Connection(gateway)
    try:
        conn.sock.sendall(b"".join(b"".join(signed(gateway, "GET", f"/{hbucket}/{k}"))
                                   for k in order))
        for key in order:
            status, _, body = conn.read_response()
            assert (status, body) == (200, key.encode())
        assert conn.request("GET", f"/{hbucket}/{keys[3]}")[2] == keys[3].encode()
    finally:
        conn.close()


def test_bad_requests_get_s3_answers(gateway: SquallProcess, hbucket: str) -> None:
    """What the owner refuses after a hand-over is answered as without one."""
    key = keys_of(1, hbucket, 1, "bad")[0]
    for worker_key in (keys_of(0, hbucket, 1, "bad")[0], key):
        conn = Connection(gateway)
        try:
            head, _ = signed(gateway, "GET", f"/{hbucket}/{worker_key}")
            conn.sock.sendall(head.replace(b"Authorization: AWS4-HMAC-SHA256 Credential=",
                                           b"Authorization: AWS4-HMAC-SHA256 Credential=X"))
            status, _, body = conn.read_response()
            assert status == 403 and b"<Code>InvalidAccessKeyId</Code>" in body
            status, _, body = conn.request("GET", f"/{hbucket}/{worker_key}-missing")
            assert status == 404 and b"<Code>NoSuchKey</Code>" in body
        finally:
            conn.close()


def test_tls_is_proxied(tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "ca")
    cert, key = issue(ca, tmp_path / "cert")
    server = HttpsSquall(tmp_path / "data", cert, key, ca.cert,
                         ["--workers", "2"]).start()
    try:
        s3: Any = server.s3()
        s3.create_bucket(Bucket="tls")
        for k in keys_of(0, "tls", 5) + keys_of(1, "tls", 5):
            s3.put_object(Bucket="tls", Key=k, Body=k.encode())
            assert s3.get_object(Bucket="tls", Key=k)["Body"].read() == k.encode()
        status = httpx.get(f"{server.endpoint}/_squall/status?workers=all",
                           verify=server.verify(), timeout=10).json()
        assert all("handover" not in w["worker"] for w in status["workers"])
    finally:
        assert server.stop() == 0, server.log()


def test_turned_off_requests_are_proxied(tmp_path: Path) -> None:
    server = start(tmp_path, NO_HANDOVER)
    try:
        s3 = make_client(server.endpoint)
        s3.create_bucket(Bucket="off")
        conn = Connection(server)
        try:
            for key in [k for p in zip(keys_of(0, "off", 5), keys_of(1, "off", 5),
                                       strict=True) for k in p]:
                assert conn.request("PUT", f"/off/{key}", key.encode())[0] == 200
                assert conn.request("GET", f"/off/{key}")[2] == key.encode()
        finally:
            conn.close()
        assert all("handover" not in w["worker"] for w in workers_status(server))
    finally:
        assert server.stop() == 0, server.log()


def test_killed_worker_with_handed_connections(tmp_path: Path) -> None:
    server = start(tmp_path, *SLOW_BACKEND)
    try:
        one_attempt_client(server.endpoint).create_bucket(Bucket="burst")
        pids = [w["worker"]["pid"] for w in workers_status(server)]
        # Connections that end on worker 1: their last request was for its key.
        theirs = keys_of(1, "burst", 4, "held")
        held = [Connection(server) for _ in theirs]
        for conn, key in zip(held, theirs, strict=True):
            assert conn.request("PUT", f"/burst/{key}", b"held")[0] == 200
        writers = Writers(server.endpoint, "burst").start()
        writers.wait_for(60)
        assert total(server, "sent") > 0
        os.kill(pids[1], signal.SIGKILL)
        for conn, key in zip(held, theirs, strict=True):
            with pytest.raises(OSError):  # its connections died with it
                conn.request("GET", f"/burst/{key}")
            conn.close()
        wait_healthy(server)
        count = len(writers.acked)
        writers.wait_for(count + 40)
        acked = writers.stop()
        acked.update({k: b"held" for k in theirs})
        assert {owner("burst", k) for k in acked} == {0, 1}
        check_all(server.endpoint, "burst", acked)
        retry = Connection(server)  # a new connection is served again, handed or not
        try:
            for key in theirs + keys_of(0, "burst", 4, "after"):
                assert retry.request("PUT", f"/burst/{key}", b"again")[0] == 200
                assert retry.request("GET", f"/burst/{key}")[2] == b"again"
        finally:
            retry.close()
        # Worker 0 reconnects to the restarted worker 1 and hands connections to it again.
        sent = handovers(server)[0]["sent"]
        for _ in range(50):  # until the kernel puts a connection on worker 0
            conn = Connection(server)
            try:
                assert conn.request("GET", f"/burst/{theirs[0]}")[2] == b"again"
            finally:
                conn.close()
            if handovers(server)[0]["sent"] > sent:
                break
        else:
            raise AssertionError(f"worker 0 handed nothing to the new worker 1: "
                                 f"{handovers(server)}")
    finally:
        assert server.stop() == 0, server.log()
