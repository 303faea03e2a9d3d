"""Slow clients against a real gateway: a request body below the minimum rate or past
its deadline is answered 400 RequestTimeout and not stored; a response read too slowly
is cut; a client at 1 MiB/s passes the default limits."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest

from tests.conftest import make_client
from tests.gateway.slow_clients import read_until_closed, request_head, slow_put, trickle
from tests.support.server import SquallProcess

#: generous bound for an answer that the limits make due within a few seconds
ANSWER_S = 20.0


@pytest.fixture(scope="module")
def paced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    """The default minimum rate and deadline, with a 1 s grace (the default is 10 s)."""
    server = SquallProcess(tmp_path_factory.mktemp("paced") / "data",
                           ["--workers", "1", "--body-rate-grace", "1"]).start()
    make_client(server.endpoint).create_bucket(Bucket="paced")
    yield server
    assert server.stop() == 0, server.log()


def assert_request_timeout(answer: bytes) -> None:
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert b"<Code>RequestTimeout</Code>" in answer


def test_a_body_below_the_minimum_rate_is_closed_with_request_timeout(
        paced: SquallProcess) -> None:
    """The probe's attack: a large declared body sent a few bytes at a time (under the
    idle timeout, which alone never fires)."""
    sock = slow_put(paced, "/paced/trickled", 10_000_000)
    try:
        started = time.monotonic()
        answer = trickle(sock, b"x" * 10, every_s=0.25, for_s=ANSWER_S)
        assert_request_timeout(answer)
        assert time.monotonic() - started < ANSWER_S
    finally:
        sock.close()
    s3 = make_client(paced.endpoint)
    assert s3.list_objects_v2(Bucket="paced", Prefix="trickled").get("KeyCount") == 0


def test_a_client_at_one_mebibyte_per_second_passes(paced: SquallProcess) -> None:
    body = os.urandom(3 * 1024 * 1024)
    piece = 64 * 1024
    with socket.create_connection(("127.0.0.1", paced.port), timeout=10) as sock:
        sock.sendall(request_head(paced, "PUT", "/paced/steady",
                                  headers={"Content-Length": str(len(body))}))
        for offset in range(0, len(body), piece):  # 16 pieces a second: 1 MiB/s
            sock.sendall(body[offset:offset + piece])
            time.sleep(piece / (1024 * 1024))
        sock.settimeout(ANSWER_S)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    got = make_client(paced.endpoint).get_object(Bucket="paced", Key="steady")
    assert got["Body"].read() == body


def test_a_response_read_too_slowly_is_cut(paced: SquallProcess) -> None:
    size = 32 * 1024 * 1024  # more than the socket buffers hold
    s3 = make_client(paced.endpoint)
    s3.put_object(Bucket="paced", Key="big", Body=os.urandom(size))
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(10)
        sock.connect(("127.0.0.1", paced.port))
        sock.sendall(request_head(paced, "GET", "/paced/big"))
        time.sleep(5)  # reads nothing: the gateway's writes wait past the grace
        received = read_until_closed(sock, limit_s=ANSWER_S)
    assert received < size
    # The gateway serves the next client as before.
    assert len(s3.get_object(Bucket="paced", Key="big")["Body"].read()) == size


def test_a_body_past_its_deadline_is_closed_with_request_timeout(tmp_path: os.PathLike[str]
                                                                 ) -> None:
    """Without a minimum rate, the deadline alone: 1 s plus the declared length at
    1 KiB/s (3 s for 2 KiB), while the client sends 320 bytes a second."""
    server = SquallProcess(tmp_path / "data", [  # type: ignore[operator]
        "--workers", "1", "--body-min-rate", "0", "--body-deadline", "1",
        "--body-deadline-rate", "1KiB/s"]).start()
    try:
        make_client(server.endpoint).create_bucket(Bucket="late")
        sock = slow_put(server, "/late/k", 2048)
        try:
            answer = trickle(sock, b"x" * 32, every_s=0.1, for_s=ANSWER_S)
            assert_request_timeout(answer)
        finally:
            sock.close()
        s3 = make_client(server.endpoint)
        assert s3.list_objects_v2(Bucket="late").get("KeyCount") == 0
        s3.put_object(Bucket="late", Key="whole", Body=b"y" * 2048)  # a prompt one passes
    finally:
        assert server.stop() == 0, server.log()
