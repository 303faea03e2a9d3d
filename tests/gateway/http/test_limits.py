"""Connection limits and timeouts, against a real gateway over raw sockets."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backends.core.errors import SlowDown
from gateway.http.slots import PROBE_RESERVE
from gateway.protocol.errors import RequestTimeout, s3_error_for
from gateway.protocol.responses import error_document
from tests.conftest import make_client
from tests.support.server import SquallProcess

MAX_REQUESTS = 3
MAX_CONNECTIONS = 12


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    data_dir: Path = tmp_path_factory.mktemp("limits") / "data"
    server = SquallProcess(data_dir, [
        "--header-timeout", "1", "--body-idle-timeout", "1", "--keep-alive-timeout", "2",
        "--max-header-bytes", "16384", "--max-header-count", "64",
        "--max-requests", str(MAX_REQUESTS), "--max-connections", str(MAX_CONNECTIONS),
        # one client address (this test's) may take every slot: the limits of one
        # address are tested in test_slots.py
        "--max-connections-per-client", "0", "--workers", "1"]).start()
    yield server
    assert server.stop() == 0, server.log()


def connect(server: SquallProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def read_all(sock: socket.socket, deadline_s: float = 10.0) -> bytes:
    """Everything until the server closes the connection (or the deadline)."""
    sock.settimeout(deadline_s)
    data = b""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        data += chunk
    return data


def head_of(server: SquallProcess) -> bytes:
    return (f"GET /limits-bucket/k HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n").encode()


def test_a_header_section_too_large_is_refused_before_authentication(
        limited: SquallProcess) -> None:
    with connect(limited) as sock:
        # refused and closed before the client sent it all: the answer is queued anyway
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(head_of(limited) + b"X-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"<Code>RequestHeaderSectionTooLarge</Code>" in answer


@pytest.mark.parametrize("request_line", [
    b"GET /limits-bucket/\xff\x01k HTTP/1.1\r\n",
    b"GET /limits-bucket/k HTTP/9\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n",  # a TLS hello on the plain port
])
def test_a_request_that_is_not_http_gets_an_s3_error(limited: SquallProcess,
                                                       request_line: bytes) -> None:
    with connect(limited) as sock:
        sock.sendall(request_line + b"Host: 127.0.0.1\r\n\r\n")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"content-type: application/xml" in answer
    assert b"<Code>BadRequest</Code>" in answer


def test_too_many_headers_are_refused(limited: SquallProcess) -> None:
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(100))  # 1 KB, > 64 headers
    with connect(limited) as sock:
        sock.sendall(head_of(limited) + many + b"\r\n")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"<Code>RequestHeaderSectionTooLarge</Code>" in answer


def test_a_hundred_thousand_headers_cost_bounded_memory(limited: SquallProcess) -> None:
    with connect(limited) as sock:
        sock.sendall(head_of(limited))
        try:
            for _ in range(100):
                sock.sendall(b"".join(b"X-H: v\r\n" for _ in range(1000)))
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused and closed while still sending: what a limit is for
        answer = read_all(sock)
    assert answer == b"" or b"RequestHeaderSectionTooLarge" in answer


def test_headers_sent_too_slowly_time_out(limited: SquallProcess) -> None:
    with connect(limited) as sock:
        sock.sendall(head_of(limited))  # never finished
        started = time.monotonic()
        answer = read_all(sock)
    assert time.monotonic() - started < 5
    assert answer.startswith(b"HTTP/1.1 400 ") and b"<Code>RequestTimeout</Code>" in answer


def test_a_timeout_sends_what_the_error_mapping_renders(limited: SquallProcess) -> None:
    """The protocol's own answers are the S3 mapping's: the same code, status and bytes
    of XML as the application would send for the same error."""
    spec, message = s3_error_for(RequestTimeout())
    with connect(limited) as sock:
        sock.sendall(head_of(limited))  # never finished
        answer = read_all(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {spec.status} Bad Request\r\n".encode())
    assert f"content-length: {len(body)}".encode() in head.split(b"\r\n")
    assert body == error_document(spec, message)


def test_a_silent_connection_is_closed(limited: SquallProcess) -> None:
    with connect(limited) as sock:
        started = time.monotonic()
        assert read_all(sock) == b""
    assert time.monotonic() - started < 5


def test_a_body_shorter_than_its_length_is_dropped(limited: SquallProcess) -> None:
    s3 = make_client(limited.endpoint)
    s3.create_bucket(Bucket="short-body")
    url = s3.generate_presigned_url("put_object", Params={"Bucket": "short-body", "Key": "k"})
    path = url.split(str(limited.port), 1)[1]
    with connect(limited) as sock:
        sock.sendall(f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{limited.port}\r\n"
                     f"Content-Length: 100\r\n\r\n".encode() + b"x" * 10)
        started = time.monotonic()
        answer = read_all(sock)
    assert time.monotonic() - started < 5
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"<Code>RequestTimeout</Code>" in answer
    assert b"not read from or written to within the timeout period" in answer
    assert s3.list_objects_v2(Bucket="short-body").get("KeyCount") == 0
    # A whole body on the same server is stored.
    s3.put_object(Bucket="short-body", Key="whole", Body=b"y" * 100_000)
    assert s3.get_object(Bucket="short-body", Key="whole")["Body"].read() == b"y" * 100_000


def test_requests_beyond_the_limit_slow_down(limited: SquallProcess) -> None:
    s3 = make_client(limited.endpoint)
    s3.create_bucket(Bucket="slow-down")
    url = s3.generate_presigned_url("put_object", Params={"Bucket": "slow-down", "Key": "k"})
    path = url.split(str(limited.port), 1)[1]
    before = httpx.get(f"{limited.endpoint}/_squall/status").json()["slowdowns"]
    held = []
    try:
        for _ in range(MAX_REQUESTS):  # requests in flight, waiting for their bodies
            sock = connect(limited)
            sock.sendall(f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{limited.port}\r\n"
                         f"Content-Length: 10\r\n\r\n".encode())
            held.append(sock)
        time.sleep(0.2)
        answer = httpx.get(f"{limited.endpoint}/slow-down", timeout=5)
        assert answer.status_code == 503
        assert answer.content == error_document(*s3_error_for(SlowDown()))
        assert answer.headers["retry-after"] == "1"
        # The admin surface never waits behind S3 traffic: health checks and status
        # reads have room of their own.
        assert httpx.get(f"{limited.endpoint}/_squall/health", timeout=5).status_code == 200
        assert httpx.get(f"{limited.endpoint}/_squall/status", timeout=5).status_code == 200
    finally:
        for sock in held:
            sock.close()
    after = httpx.get(f"{limited.endpoint}/_squall/status").json()["slowdowns"]
    assert after >= before + 1


def closed_now(socks: list[socket.socket]) -> list[socket.socket]:
    """The sockets the server has closed (or reset), without waiting."""
    closed = []
    for sock in socks:
        sock.setblocking(False)
        try:
            if sock.recv(1) == b"":
                closed.append(sock)
        except ConnectionResetError:
            closed.append(sock)
        except BlockingIOError:
            pass
        sock.setblocking(True)
    return closed


def ask(sock: socket.socket, server: SquallProcess, path: str) -> bytes:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
    return read_all(sock)


def test_connections_beyond_the_limit_get_probe_slots_then_are_closed(
        limited: SquallProcess) -> None:
    probes = PROBE_RESERVE // 4  # probe slots of one client address
    socks = [connect(limited) for _ in range(MAX_CONNECTIONS + 1)]
    # A probe comes from an address of its own (a kubelet, a Prometheus).
    socks += [socket.create_connection(("127.0.0.1", limited.port), timeout=10,
                                       source_address=("127.0.0.2", 0))
              for _ in range(probes + 2)]
    try:
        time.sleep(0.3)  # well within the header timeout: only the extra ones are closed
        closed = closed_now(socks)
        # the last of 127.0.0.1 (it holds regular slots), two beyond 127.0.0.2's share
        assert len(closed) == 3 and socks[MAX_CONNECTIONS] in closed
        # Past max_connections a connection may ask for health or metrics, once.
        health = ask(socks[MAX_CONNECTIONS + 1], limited, "/_squall/health")
        assert health.startswith(b"HTTP/1.1 200 ") and b"connection: close" in health
        metrics = ask(socks[MAX_CONNECTIONS + 2], limited, "/_squall/metrics")
        assert metrics.startswith(b"HTTP/1.1 200 ") and b"squall_" in metrics
        # Anything else there is S3's SlowDown, and the connection is closed.
        refused = ask(socks[MAX_CONNECTIONS + 3], limited, "/limits-bucket/k")
        assert refused.startswith(b"HTTP/1.1 503 ") and b"<Code>SlowDown</Code>" in refused
        assert b"retry-after: " in refused.lower()
    finally:
        for sock in socks:
            sock.close()
