"""Request bodies of a stated length reach the application as the socket's reads, past
the HTTP parser: bodies in many reads, a next request in the same read as a body's end,
bytes beyond the stated length, a client gone mid-body, ``Expect: 100-continue``, and
bodies the parser still reads (chunked)."""

from __future__ import annotations

import hashlib
import os
import socket
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import make_client
from tests.support.server import SquallProcess
from tests.support.signing import signed_headers

KIB = 1024


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    server = SquallProcess(tmp_path_factory.mktemp("bodies") / "data").start()
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def bucket(gateway: SquallProcess) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    make_client(gateway.endpoint).create_bucket(Bucket=name)
    return name


def _head(gateway: SquallProcess, method: str, path: str, body: bytes,
          extra: dict[str, str] | None = None) -> bytes:
    """The request line and signed headers of a request with ``body`` (signed SHA-256)."""
    headers = signed_headers(method, gateway.endpoint + path, body, extra)
    headers["Content-Length"] = str(len(body))
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{gateway.port}",
             *(f"{k}: {v}" for k, v in headers.items() if k.lower() != "host"), "", ""]
    return "\r\n".join(lines).encode()


def _responses(sock: socket.socket, count: int) -> list[bytes]:
    """The heads (status line and headers) of ``count`` responses without bodies, or
    with the bodies their Content-Length states (appended to the head)."""
    data, found = b"", []
    sock.settimeout(30)
    while len(found) < count:
        while b"\r\n\r\n" not in data:
            more = sock.recv(65536)
            if not more:
                return found
            data += more
        head, _, data = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(data) < length:
            more = sock.recv(65536)
            if not more:
                break
            data += more
        found.append(head + b"\r\n\r\n" + data[:length])
        data = data[length:]
    return found


def _send_in_pieces(sock: socket.socket, data: bytes, sizes: list[int]) -> None:
    """Send ``data`` in pieces of ``sizes`` (the rest last), pausing between them so the
    server reads each on its own."""
    at = 0
    for size in sizes:
        sock.sendall(data[at:at + size])
        at += size
        time.sleep(0.02)
    sock.sendall(data[at:])


def _stored(gateway: SquallProcess, bucket: str, key: str) -> bytes | None:
    s3 = make_client(gateway.endpoint)
    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None


def test_a_body_in_many_reads_is_stored_whole(gateway: SquallProcess, bucket: str) -> None:
    body = os.urandom(3 * 1024 * KIB + 333)
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(_head(gateway, "PUT", f"/{bucket}/many", body) + body[:10])
        _send_in_pieces(sock, body[10:], [1, 4095, 64 * KIB + 7, 300 * KIB, 1, 2 * 1024 * KIB])
        (answer,) = _responses(sock, 1)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert f'"{hashlib.md5(body).hexdigest()}"'.encode() in answer  # the ETag
    assert _stored(gateway, bucket, "many") == body


def test_a_request_in_the_read_that_ends_a_body_is_served_next(
        gateway: SquallProcess, bucket: str) -> None:
    first, second = os.urandom(200 * KIB + 1), os.urandom(5 * KIB)
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(_head(gateway, "PUT", f"/{bucket}/first", first) + first[:100 * KIB])
        time.sleep(0.05)
        # the first body's end, the whole second request and the head of a third (a GET)
        sock.sendall(first[100 * KIB:] + _head(gateway, "PUT", f"/{bucket}/second", second)
                     + second + _head(gateway, "GET", f"/{bucket}/first", b""))
        answers = _responses(sock, 3)
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 3
    assert answers[2].endswith(first)
    assert _stored(gateway, bucket, "second") == second


def test_bytes_after_the_stated_length_are_the_next_request(
        gateway: SquallProcess, bucket: str) -> None:
    body = os.urandom(100 * KIB)
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(_head(gateway, "PUT", f"/{bucket}/stated", body) + body[:KIB])
        time.sleep(0.05)
        sock.sendall(body[KIB:])
        (answer,) = _responses(sock, 1)
        sock.sendall(b"this is no request\r\n\r\n")
        (refused,) = _responses(sock, 1)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert refused.startswith(b"HTTP/1.1 400 ") and b"<Code>BadRequest</Code>" in refused
    assert _stored(gateway, bucket, "stated") == body


def test_a_client_gone_mid_body_stores_nothing(gateway: SquallProcess, bucket: str) -> None:
    body = os.urandom(1024 * KIB)
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(_head(gateway, "PUT", f"/{bucket}/gone", body) + body[:KIB])
        time.sleep(0.05)
        sock.sendall(body[KIB:600 * KIB])
        time.sleep(0.05)
    time.sleep(0.5)
    assert _stored(gateway, bucket, "gone") is None
    make_client(gateway.endpoint).put_object(Bucket=bucket, Key="after", Body=b"z" * 10)
    assert _stored(gateway, bucket, "after") == b"z" * 10


def test_a_wrong_body_of_the_stated_length_is_refused(gateway: SquallProcess,
                                                      bucket: str) -> None:
    body = os.urandom(256 * KIB)
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(_head(gateway, "PUT", f"/{bucket}/wrong", body))
        _send_in_pieces(sock, bytes(len(body)), [64 * KIB])  # zeros, not the signed bytes
        (answer,) = _responses(sock, 1)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"<Code>XAmzContentSHA256Mismatch</Code>" in answer
    assert _stored(gateway, bucket, "wrong") is None


def test_a_body_sent_after_100_continue_is_stored(gateway: SquallProcess,
                                                  bucket: str) -> None:
    body = os.urandom(500 * KIB)
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(_head(gateway, "PUT", f"/{bucket}/expect", body,
                           {"Expect": "100-continue"}))
        (interim,) = _responses(sock, 1)
        assert interim.startswith(b"HTTP/1.1 100 ")
        _send_in_pieces(sock, body, [KIB, 200 * KIB])
        (answer,) = _responses(sock, 1)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert _stored(gateway, bucket, "expect") == body


def test_a_chunked_body_is_still_read_by_the_parser(gateway: SquallProcess,
                                                    bucket: str) -> None:
    body = os.urandom(70 * KIB)
    head = _head(gateway, "PUT", f"/{bucket}/chunked", body,
                 {"x-amz-decoded-content-length": str(len(body))})
    head = head.replace(f"Content-Length: {len(body)}\r\n".encode(),
                        b"Transfer-Encoding: chunked\r\n")
    framed = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 10 * KIB]), body[i:i + 10 * KIB])
                      for i in range(0, len(body), 10 * KIB)) + b"0\r\n\r\n"
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.sendall(head)
        _send_in_pieces(sock, framed, [5, 20 * KIB])
        (answer,) = _responses(sock, 1)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert _stored(gateway, bucket, "chunked") == body
