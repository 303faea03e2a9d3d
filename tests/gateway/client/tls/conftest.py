"""Fixtures of the TLS tests: a private CA, certificates it signs, HTTPS gateways."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from tests.gateway.client.tls.certs import Authority, issue, make_ca
from tests.support.server import ACCESS_KEY, SECRET_KEY, SquallProcess


class HttpsSquall(SquallProcess):
    """A gateway serving HTTPS with ``cert``/``key``; clients trust ``ca``."""

    def __init__(self, data_dir: Path, cert: Path, key: Path, ca: Path,
                 args: Sequence[str] = (), **kwargs: object) -> None:
        super().__init__(data_dir, ["--tls-cert", str(cert), "--tls-key", str(key), *args],
                         **kwargs)  # type: ignore[arg-type]
        self.ca = ca

    @property
    def endpoint(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def verify(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca)

    def s3(self) -> object:
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                            verify=str(self.ca),
                            config=Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 1}))


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def server_cert(ca: Authority, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return issue(ca, tmp_path_factory.mktemp("server-cert"))


@pytest.fixture
def make_https(tmp_path: Path, ca: Authority, server_cert: tuple[Path, Path]
               ) -> Iterator[Callable[..., HttpsSquall]]:
    """Start HTTPS gateways (stopped at the end): ``make_https(*args, cert=, key=)``."""
    started: list[HttpsSquall] = []

    def make(*args: str, cert: Path | None = None, key: Path | None = None,
             name: str = "data") -> HttpsSquall:
        server = HttpsSquall(tmp_path / name, cert or server_cert[0], key or server_cert[1],
                             ca.cert, args)
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.stop()
