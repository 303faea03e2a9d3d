"""Error answers reveal nothing of the server: no data directory path, no internal
exception text; an anonymous caller is refused before its request's content is judged."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import make_client
from tests.support.server import SquallProcess
from tests.support.signing import send

LEAKS = ("Traceback", "Errno", "rocksdict", "OSError", "Exception")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SquallProcess]:
    gateway = SquallProcess(tmp_path_factory.mktemp("errors") / "data").start()
    make_client(gateway.endpoint).create_bucket(Bucket="errs")
    yield gateway
    assert gateway.stop() == 0, gateway.log()


def assert_clean(server: SquallProcess, response: httpx.Response) -> None:
    text = response.text + " ".join(f"{k}: {v}" for k, v in response.headers.items())
    for secret in (str(server.data_dir), str(server.data_dir.parent), *LEAKS):
        assert secret not in text, (secret, response.status_code, text)


def test_unsigned_delete_objects_is_refused_before_its_content_is_checked(
        server: SquallProcess) -> None:
    body = b"<Delete><Object><Key>a</Key></Object></Delete>"  # no Content-MD5
    answer = httpx.post(f"{server.endpoint}/errs?delete", content=body, timeout=10)
    assert answer.status_code == 403 and "<Code>AccessDenied</Code>" in answer.text
    assert_clean(server, answer)
    # Signed by its owner, the same request is judged on its content.
    signed = send("POST", f"{server.endpoint}/errs?delete", body)
    assert signed.status_code == 400 and "<Code>InvalidArgument</Code>" in signed.text


def test_an_unsigned_request_with_a_bad_path_is_refused_before_the_path_is_judged(
        server: SquallProcess) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(f"GET /errs/%FF%FE HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                     "Connection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 403 "), answer
    assert b"<Code>AccessDenied</Code>" in answer


@pytest.mark.parametrize(("method", "path", "body", "code"), [
    ("GET", "/errs/missing", b"", "NoSuchKey"),
    ("GET", "/no-such-bucket/k", b"", "NoSuchBucket"),
    ("PUT", "/Bad_Bucket", b"", "InvalidBucketName"),
    ("PUT", "/errs?versioning", b"<not-xml", "MalformedXML"),
    ("GET", "/errs/k?uploadId=nope", b"", "NoSuchUpload"),
    ("GET", "/errs/../../etc/passwd", b"", None),
    ("PUT", "/errs/k?partNumber=0&uploadId=x", b"x", None),
    ("GET", "/errs?list-type=2&max-keys=-1", b"", None),
])
def test_error_bodies_name_no_server_path(server: SquallProcess, method: str, path: str,
                                          body: bytes, code: str | None) -> None:
    answer = send(method, f"{server.endpoint}{path}", body)
    assert answer.status_code >= 400
    if code is not None:
        assert f"<Code>{code}</Code>" in answer.text, answer.text
    assert_clean(server, answer)


def test_admin_errors_name_no_server_path(server: SquallProcess) -> None:
    for path in ("/_squall/nope", "/_squall/users", "/_squall/providers"):
        answer = httpx.get(f"{server.endpoint}{path}", timeout=10)
        assert answer.status_code >= 400
        assert_clean(server, answer)


def test_the_data_directory_is_where_the_scan_looks(server: SquallProcess) -> None:
    """The scan above is meaningful: the gateway's files are under that path."""
    assert isinstance(server.data_dir, Path) and (server.data_dir / "index").is_dir()
