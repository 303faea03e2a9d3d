"""SIGHUP reloads the certificate: new connections get the new one, open ones go on."""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.gateway.client.tls.certs import Authority, issue
from tests.gateway.client.tls.conftest import HttpsSquall


def _connect(server: HttpsSquall) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=server.ca)
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def _common_name(conn: ssl.SSLSocket) -> str:
    cert = conn.getpeercert()
    assert cert is not None
    return next(value for rdn in cert["subject"] for key, value in rdn if key == "commonName")


def _health(conn: ssl.SSLSocket) -> bytes:
    conn.sendall(b"GET /_squall/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = conn.recv(65536)
        assert chunk, "connection closed"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:  # the whole answer: the connection is used again
        chunk = conn.recv(65536)
        assert chunk, "connection closed"
        body += chunk
    return head.split(b"\r\n", 1)[0]


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "workers-2"])
def test_sighup_reloads_the_certificate(workers: str, ca: Authority, tmp_path: Path,
                                        make_https: Callable[..., HttpsSquall]) -> None:
    first = issue(ca, tmp_path / "first", common_name="first")
    second = issue(ca, tmp_path / "second", common_name="second")
    live_cert, live_key = tmp_path / "live.pem", tmp_path / "live-key.pem"
    shutil.copy(first[0], live_cert)
    shutil.copy(first[1], live_key)
    server = make_https("--workers", workers, cert=live_cert, key=live_key)
    old = _connect(server)
    try:
        assert _common_name(old) == "first"
        assert _health(old) == b"HTTP/1.1 200 OK"
        shutil.copy(second[0], live_cert)
        shutil.copy(second[1], live_key)
        assert server.proc is not None
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while True:  # every process reloads: a few new connections all see the new one
            names = set()
            for _ in range(2 * int(workers)):
                with _connect(server) as conn:
                    names.add(_common_name(conn))
            if names == {"second"}:
                break
            assert time.monotonic() < deadline, f"still served: {names}"
            time.sleep(0.05)
        assert _health(old) == b"HTTP/1.1 200 OK"  # the open connection was not dropped
        assert server.proc.poll() is None
    finally:
        old.close()


def test_a_bad_reload_keeps_the_certificate(ca: Authority, tmp_path: Path, server_cert: tuple,
                                            make_https: Callable[..., HttpsSquall]) -> None:
    live_cert, live_key = tmp_path / "live.pem", tmp_path / "live-key.pem"
    shutil.copy(server_cert[0], live_cert)
    shutil.copy(server_cert[1], live_key)
    server = make_https(cert=live_cert, key=live_key)
    other = issue(ca, tmp_path / "other", common_name="other")
    shutil.copy(other[1], live_key)  # the key of another certificate: not a pair
    assert server.proc is not None
    server.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "not reloaded" not in server.log():
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.05)
    with _connect(server) as conn:
        assert _common_name(conn) == "squall test server"
        assert _health(conn) == b"HTTP/1.1 200 OK"
