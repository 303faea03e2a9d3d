"""The Locust User every scenario builds on: S3 over SigV4, one bucket, options from the CLI.

A scenario registers its options with::

    @events.init_command_line_parser.add_listener
    def _options(parser):
        add_s3_arguments(parser)
        parser.add_argument("--my-option", ...)

and subclasses :class:`S3User`; ``self.s3`` is a client for ``--host`` and ``self.bucket``
exists once ``on_start`` has run (created once per process, an existing bucket is reused).
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

from gevent.lock import Semaphore
from locust import User

from gateway.client.credentials import credentials_from_env
from gateway.client.sigv4 import DEFAULT_REGION, Signer
from loadtests.s3client import S3Client, fire


def add_s3_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by every scenario."""
    group = parser.add_argument_group("S3 (Squall load tests)")
    group.add_argument("--bucket", default="squall-loadtest", help="bucket to use (created)")
    group.add_argument("--region", default=DEFAULT_REGION, help="SigV4 signing region")
    group.add_argument(
        "--key-prefix", default="loadtest", help="prefix of every key the scenario writes"
    )
    group.add_argument(
        "--sign-payload",
        action="store_true",
        default=False,
        help="sign the SHA-256 of bodies instead of sending UNSIGNED-PAYLOAD",
    )
    group.add_argument(
        "--request-timeout", type=float, default=300.0, help="seconds before a request fails"
    )


@lru_cache(maxsize=8)
def payload(size: int) -> bytes:
    """``size`` random (incompressible) bytes, made once and shared by all users of a process."""
    return os.urandom(size)


def option(environment: Any, name: str, default: Any) -> Any:
    """A parsed command-line option, or ``default`` when run without the CLI (tests, library)."""
    return (
        getattr(environment.parsed_options, name, default)
        if environment.parsed_options
        else default
    )


class S3User(User):
    """Base class of the scenarios: owns one :class:`S3Client` per endpoint it talks to."""

    abstract = True
    _bucket_lock: ClassVar[Semaphore] = Semaphore()
    _buckets_ready: ClassVar[set[tuple[str, str]]] = set()

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.user_id = uuid.uuid4().hex[:10]
        self.bucket: str = option(environment, "bucket", "squall-loadtest")
        self.prefix = f"{option(environment, 'key_prefix', 'loadtest')}/{self.user_id}"
        self._signer: Signer | None = None
        self._clients: dict[str, S3Client] = {}
        self._open: list[S3Client] = []

    @property
    def s3(self) -> S3Client:
        """The client for ``--host``."""
        if not self.host:
            raise ValueError("no endpoint: pass --host http://127.0.0.1:PORT")
        return self.client_for(self.host)

    def client_for(self, endpoint: str) -> S3Client:
        """This user's client for ``endpoint`` (one persistent connection, reused)."""
        if endpoint not in self._clients:
            self._clients[endpoint] = self.new_client(endpoint)
        return self._clients[endpoint]

    def new_client(self, endpoint: str) -> S3Client:
        """A further client (its own connection) for ``endpoint``; closed when the user stops."""
        if self._signer is None:
            self._signer = Signer(
                credentials_from_env(),
                option(self.environment, "region", DEFAULT_REGION),
                sign_payload=option(self.environment, "sign_payload", False),
            )
        client = S3Client(
            endpoint,
            self._signer,
            self.environment.events.request,
            timeout=option(self.environment, "request_timeout", 300.0),
        )
        self._open.append(client)
        return client

    def ensure_bucket(self, client: S3Client | None = None) -> None:
        """Create the bucket once per process and endpoint (an existing one is fine)."""
        client = client or self.s3
        marker = (client.endpoint, self.bucket)
        with self._bucket_lock:
            if marker not in self._buckets_ready:
                client.create_bucket(self.bucket)
                self._buckets_ready.add(marker)

    def on_start(self) -> None:
        self.ensure_bucket()

    def on_stop(self) -> None:
        for client in self._open:
            client.close()
        self._open.clear()
        self._clients.clear()

    def key(self, *parts: object) -> str:
        """A key under this user's own prefix."""
        return "/".join([self.prefix, *map(str, parts)])


class CheckFailed(Exception):
    """A scenario check did not hold (stale read, missing listing entry...)."""


@dataclass(slots=True)
class Measure:
    """What a :func:`timed` block reports: bytes moved and an optional failure."""

    length: int = 0
    failure: str | None = None

    def fail(self, message: str) -> None:
        self.failure = message


def report(
    environment: Any,
    request_type: str,
    name: str,
    response_time_ms: float,
    length: int = 0,
    exception: BaseException | None = None,
) -> None:
    """Report a custom measurement to Locust's statistics (like a request)."""
    fire(environment.events.request, request_type, name, response_time_ms, length, exception)


@contextmanager
def timed(environment: Any, request_type: str, name: str) -> Iterator[Measure]:
    """Time the block and report it; an exception or ``Measure.fail`` counts as a failure."""
    measure = Measure()
    start = time.perf_counter()
    try:
        yield measure
    except Exception as exc:
        report(environment, request_type, name, (time.perf_counter() - start) * 1000, 0, exc)
        raise
    failure = CheckFailed(measure.failure) if measure.failure else None
    elapsed = (time.perf_counter() - start) * 1000
    report(environment, request_type, name, elapsed, measure.length, failure)
