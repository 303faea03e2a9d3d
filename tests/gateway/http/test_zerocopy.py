"""Large GETs sent by sendfile: whole, ranged and multipart objects, from the cache and
from the backend; slow and vanishing clients; the send loop itself on a real socket."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import pytest
import uvloop

from backends.core.blocking import run_blocking
from gateway.http.zerocopy import send_file
from tests.conftest import make_client
from tests.support.server import SquallProcess
from tests.support.signing import signed_headers

MIB = 1 << 20


@pytest.fixture(scope="module", params=["cached", "uncached"])
def gateway(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    args = ["--cache-admission", "cache"] if request.param == "cached" else ["--cache-size", "0"]
    server = SquallProcess(tmp_path_factory.mktemp("zerocopy") / "data", args).start()
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def stored(gateway: SquallProcess) -> tuple[str, bytes, bytes]:
    """A bucket with ``one`` (a single PUT) and ``parts`` (a two-part upload)."""
    s3 = make_client(gateway.endpoint)
    bucket = f"z-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    one = os.urandom(3 * MIB + 17)
    s3.put_object(Bucket=bucket, Key="one", Body=one)
    parts = os.urandom(5 * MIB) + os.urandom(MIB + 3)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="parts")["UploadId"]
    etags = [s3.upload_part(Bucket=bucket, Key="parts", UploadId=upload, PartNumber=n,
                            Body=body)["ETag"]
             for n, body in ((1, parts[:5 * MIB]), (2, parts[5 * MIB:]))]
    s3.complete_multipart_upload(
        Bucket=bucket, Key="parts", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e}
                                   for n, e in enumerate(etags, start=1)]})
    return bucket, one, parts


@pytest.mark.parametrize("key", ["one", "parts"])
def test_whole_and_ranged_reads_return_the_stored_bytes(
        gateway: SquallProcess, stored: tuple[str, bytes, bytes], key: str) -> None:
    s3 = make_client(gateway.endpoint)
    bucket, one, parts = stored
    data = one if key == "one" else parts
    for _ in range(2):  # the second read may take the other path (cache or backend)
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    for first, last in ((0, len(data) - 1), (1000, 2 * MIB), (len(data) - MIB - 10, len(data) - 1)):
        got = s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{last}")
        assert got["ContentLength"] == last - first + 1
        assert got["Body"].read() == data[first:last + 1]
    assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == len(data)


def _raw_get(gateway: SquallProcess, path: str, rcvbuf: int | None = None) -> socket.socket:
    url = gateway.endpoint + path
    headers = signed_headers("GET", url)
    sock = socket.create_connection(("127.0.0.1", gateway.port))
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    host = urlsplit(url).netloc
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}",
             *(f"{k}: {v}" for k, v in headers.items() if k.lower() != "host"), "", ""]
    sock.sendall("\r\n".join(lines).encode())
    return sock


def _read_response(sock: socket.socket, *, chunk: int = 1 << 16) -> tuple[bytes, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(chunk)
    head, body = buf.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        data = sock.recv(chunk)
        assert data, "connection closed before the body ended"
        body += data
    return head, body


def test_a_slow_reader_gets_every_byte(gateway: SquallProcess,
                                       stored: tuple[str, bytes, bytes]) -> None:
    bucket, one, _ = stored
    with _raw_get(gateway, f"/{bucket}/one", rcvbuf=16 * 1024) as sock:
        head, body = _read_response(sock, chunk=4096)
    assert head.startswith(b"HTTP/1.1 200")
    assert body == one


def test_a_client_that_leaves_mid_body_leaves_the_server_serving(
        gateway: SquallProcess, stored: tuple[str, bytes, bytes]) -> None:
    bucket, one, parts = stored
    for _ in range(3):
        sock = _raw_get(gateway, f"/{bucket}/parts", rcvbuf=16 * 1024)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()  # RST with most of the body unsent
    s3 = make_client(gateway.endpoint)
    assert s3.get_object(Bucket=bucket, Key="one")["Body"].read() == one
    with _raw_get(gateway, f"/{bucket}/parts") as sock:  # keep-alive: two on one connection
        assert _read_response(sock)[1] == parts


async def _serve_file(path: Path, offset: int, count: int) -> bytes:
    """Send a file region over a real loopback connection with ``send_file``."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    class Sender(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            stream = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
            stream.write(b"head:")  # buffered bytes go first
            asyncio.ensure_future(self.send(stream))

        async def send(self, transport: asyncio.Transport) -> None:
            fd = os.open(path, os.O_RDONLY)
            try:
                await send_file(transport, fd, offset, count, run_blocking)
                done.set_result(None)
            except OSError as exc:
                done.set_exception(exc)
            finally:
                os.close(fd)
                transport.close()

    server = await loop.create_server(Sender, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = bytearray()
    while chunk := await reader.read(1 << 16):
        received += chunk
        await asyncio.sleep(0)  # a reader slower than the sender: the socket fills up
    writer.close()
    server.close()
    await done
    return bytes(received)


def test_send_file_sends_the_region_after_buffered_bytes(tmp_path: Path) -> None:
    data = os.urandom(8 * MIB + 5)
    (tmp_path / "f").write_bytes(data)
    got = uvloop.run(_serve_file(tmp_path / "f", 123, len(data) - 200))
    assert got == b"head:" + data[123:len(data) - 77]


def test_send_file_fails_when_the_file_is_shorter_than_the_region(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 1000)
    with pytest.raises(OSError, match="ended before"):
        uvloop.run(_serve_file(tmp_path / "f", 0, 2000))
