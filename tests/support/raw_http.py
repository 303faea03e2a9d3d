"""Raw HTTP/1.1 on one socket: requests signed as boto3 signs them, sent as the test
chooses (in pieces, pipelined), and a minimal response reader."""

from __future__ import annotations

import socket

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


def signed(server: SquallProcess, method: str, path: str, body: bytes = b"",
           headers: dict[str, str] | None = None) -> tuple[bytes, bytes]:
    """(request head, body) signed with SigV4 as boto3 would."""
    url = f"{server.endpoint}{path}"
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    request.headers["Content-Length"] = str(len(body))
    S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "s3", "us-east-1").add_auth(request)
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{server.port}"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()
              if name.lower() != "host"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), body


class Connection:
    """One client TCP connection and a minimal HTTP/1.1 response reader."""

    def __init__(self, server: SquallProcess) -> None:
        self.server = server
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        self._buffer = b""

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self._buffer += data

    def read_head(self) -> tuple[int, dict[str, str]]:
        while b"\r\n\r\n" not in self._buffer:
            self._fill()
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        fields = {n.strip().lower(): v.strip() for n, v in (x.split(":", 1) for x in lines)}
        return int(status_line.split()[1]), fields

    def read_response(self, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        status, fields = self.read_head()
        length = 0 if method == "HEAD" else int(fields.get("content-length", "0"))
        while len(self._buffer) < length:
            self._fill()
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return status, fields, body

    def request(self, method: str, path: str, body: bytes = b"",
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        head, payload = signed(self.server, method, path, body, headers)
        self.sock.sendall(head + payload)
        return self.read_response(method)
