"""Hostile clients on raw sockets: signed PUTs whose bodies come slowly, GETs whose
responses are not read."""

from __future__ import annotations

import socket
import time

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


def request_head(server: SquallProcess, method: str, path: str, *,
                 headers: dict[str, str] | None = None, access_key: str = ACCESS_KEY,
                 secret_key: str = SECRET_KEY) -> bytes:
    """A SigV4-signed request head whose body (if any) is UNSIGNED-PAYLOAD."""
    request = AWSRequest(method=method, url=f"{server.endpoint}{path}",
                         headers=dict(headers or {}))
    request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    S3SigV4Auth(Credentials(access_key, secret_key), "s3", "us-east-1").add_auth(request)
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{server.port}"]
    lines += [f"{n}: {v}" for n, v in request.headers.items() if n.lower() != "host"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def slow_put(server: SquallProcess, path: str, length: int, *, access_key: str = ACCESS_KEY,
             secret_key: str = SECRET_KEY, first: bytes = b"x") -> socket.socket:
    """A PUT declaring ``length`` bytes whose head and ``first`` bytes are sent; the
    rest is up to the caller (or never comes)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(request_head(server, "PUT", path, headers={"Content-Length": str(length)},
                              access_key=access_key, secret_key=secret_key) + first)
    return sock


def answer_within(sock: socket.socket, seconds: float) -> bytes:
    """What the server sent on ``sock`` within ``seconds`` (b"" if nothing yet)."""
    sock.settimeout(seconds)
    try:
        return sock.recv(65536)
    except (TimeoutError, BlockingIOError):
        return b""
    except ConnectionResetError:
        return b"<reset>"


def trickle(sock: socket.socket, chunk: bytes, every_s: float, for_s: float) -> bytes:
    """Send ``chunk`` every ``every_s`` until the server answers (or ``for_s`` passed);
    the answer, b"" if none came."""
    end = time.monotonic() + for_s
    while time.monotonic() < end:
        answer = answer_within(sock, every_s)
        if answer:
            return answer
        try:
            sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return answer_within(sock, 1.0) or b"<closed>"
    return b""


def read_until_closed(sock: socket.socket, limit_s: float) -> int:
    """Bytes read until the server closes the connection (or ``limit_s``)."""
    total = 0
    end = time.monotonic() + limit_s
    sock.settimeout(1.0)
    while time.monotonic() < end:
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            continue
        except ConnectionResetError:
            break
        if not data:
            break
        total += len(data)
    return total
