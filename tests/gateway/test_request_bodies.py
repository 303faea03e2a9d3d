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
from tests.support.raw_http import Connection, signed
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


@pytest.fixture
def conn(gateway: SquallProcess) -> Iterator[Connection]:
    connection = Connection(gateway)
    yield connection
    connection.close()


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


def test_a_body_in_many_reads_is_stored_whole(gateway: SquallProcess, bucket: str,
                                              conn: Connection) -> None:
    head, body = signed(gateway, "PUT", f"/{bucket}/many", os.urandom(3 * 1024 * KIB + 333))
    conn.sock.sendall(head + body[:10])
    _send_in_pieces(conn.sock, body[10:], [1, 4095, 64 * KIB + 7, 300 * KIB, 1, 2 * 1024 * KIB])
    status, fields, _ = conn.read_response()
    assert status == 200
    assert fields["etag"] == f'"{hashlib.md5(body).hexdigest()}"'
    assert _stored(gateway, bucket, "many") == body


def test_a_request_in_the_read_that_ends_a_body_is_served_next(
        gateway: SquallProcess, bucket: str, conn: Connection) -> None:
    head, first = signed(gateway, "PUT", f"/{bucket}/first", os.urandom(200 * KIB + 1))
    conn.sock.sendall(head + first[:100 * KIB])
    time.sleep(0.05)
    # the first body's end, the whole second request and the head of a third (a GET)
    second_head, second = signed(gateway, "PUT", f"/{bucket}/second", os.urandom(5 * KIB))
    third_head, _ = signed(gateway, "GET", f"/{bucket}/first")
    conn.sock.sendall(first[100 * KIB:] + second_head + second + third_head)
    answers = [conn.read_response() for _ in range(3)]
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert answers[2][2] == first
    assert _stored(gateway, bucket, "second") == second


def test_bytes_after_the_stated_length_are_the_next_request(
        gateway: SquallProcess, bucket: str, conn: Connection) -> None:
    head, body = signed(gateway, "PUT", f"/{bucket}/stated", os.urandom(100 * KIB))
    conn.sock.sendall(head + body[:KIB])
    time.sleep(0.05)
    conn.sock.sendall(body[KIB:])
    assert conn.read_response()[0] == 200
    conn.sock.sendall(b"this is no request\r\n\r\n")
    status, _, refused = conn.read_response()
    assert status == 400 and b"<Code>BadRequest</Code>" in refused
    assert _stored(gateway, bucket, "stated") == body


def test_a_client_gone_mid_body_stores_nothing(gateway: SquallProcess, bucket: str,
                                               conn: Connection) -> None:
    head, body = signed(gateway, "PUT", f"/{bucket}/gone", os.urandom(1024 * KIB))
    conn.sock.sendall(head + body[:KIB])
    time.sleep(0.05)
    conn.sock.sendall(body[KIB:600 * KIB])
    time.sleep(0.05)
    conn.close()
    time.sleep(0.5)
    assert _stored(gateway, bucket, "gone") is None
    make_client(gateway.endpoint).put_object(Bucket=bucket, Key="after", Body=b"z" * 10)
    assert _stored(gateway, bucket, "after") == b"z" * 10


def test_a_wrong_body_of_the_stated_length_is_refused(gateway: SquallProcess, bucket: str,
                                                      conn: Connection) -> None:
    head, body = signed(gateway, "PUT", f"/{bucket}/wrong", os.urandom(256 * KIB))
    conn.sock.sendall(head)
    _send_in_pieces(conn.sock, bytes(len(body)), [64 * KIB])  # zeros, not the signed bytes
    status, _, answer = conn.read_response()
    assert status == 400 and b"<Code>XAmzContentSHA256Mismatch</Code>" in answer
    assert _stored(gateway, bucket, "wrong") is None


def test_a_body_sent_after_100_continue_is_stored(gateway: SquallProcess, bucket: str,
                                                  conn: Connection) -> None:
    head, body = signed(gateway, "PUT", f"/{bucket}/expect", os.urandom(500 * KIB),
                        {"Expect": "100-continue"})
    conn.sock.sendall(head)
    assert conn.read_response()[0] == 100
    _send_in_pieces(conn.sock, body, [KIB, 200 * KIB])
    assert conn.read_response()[0] == 200
    assert _stored(gateway, bucket, "expect") == body


def test_a_chunked_body_is_still_read_by_the_parser(gateway: SquallProcess, bucket: str,
                                                    conn: Connection) -> None:
    body = os.urandom(70 * KIB)
    path = f"/{bucket}/chunked"
    headers = signed_headers("PUT", gateway.endpoint + path, body,
                             {"x-amz-decoded-content-length": str(len(body))})
    lines = [f"PUT {path} HTTP/1.1", f"Host: 127.0.0.1:{gateway.port}",
             "Transfer-Encoding: chunked",
             *(f"{k}: {v}" for k, v in headers.items() if k.lower() != "host"), "", ""]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 10 * KIB]), body[i:i + 10 * KIB])
                      for i in range(0, len(body), 10 * KIB)) + b"0\r\n\r\n"
    conn.sock.sendall("\r\n".join(lines).encode())
    _send_in_pieces(conn.sock, framed, [5, 20 * KIB])
    assert conn.read_response()[0] == 200
    assert _stored(gateway, bucket, "chunked") == body
