"""``squall sync``: wait until everything dirty at the gateway is on the backend.

While it waits it shows what is left, the flush rate and an estimated time to go (a
refreshing line on a terminal, a line every few seconds otherwise); it ends with what
was flushed during the sync. Every failure is one ``squall sync: ...`` line and a
non-zero exit (:mod:`gateway.client.failures`): 1 for a refusal, an unreachable gateway or
objects the backend refuses, 2 for missing credentials or a bad CA bundle.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import httpx

from gateway.client.credentials import FROM as CREDENTIALS_FROM
from gateway.client.credentials import Credentials, credentials_from_env
from gateway.client.failures import (
    CREDENTIALS_HINT,
    ClientFailure,
    Refused,
    exit_status,
    reaching,
)
from gateway.client.sigv4 import Signer
from gateway.client.tls import endpoint_context
from gateway.commands.options import add_gateway_options
from gateway.config.humanize import format_bytes, format_duration

#: seconds between two progress lines when stderr is not a terminal
LOG_INTERVAL_S = 5.0
#: seconds between two refreshes of the progress line on a terminal
TTY_INTERVAL_S = 0.5
#: seconds between two reads of /_squall/status (objects left, flush rate)
STATUS_INTERVAL_S = 1.0
NAME = "squall sync"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("sync", help="wait until all dirty data is flushed to the backend",
                       description="Return once everything that was dirty when it was "
                                   "called is on the backend, showing progress. Credentials "
                                   f"as for S3 clients: {CREDENTIALS_FROM}. Exit status: "
                                   "0 all flushed, 1 not (refused, unreachable, objects the "
                                   "backend refuses), 2 bad input (no credentials).")
    add_gateway_options(p)
    p.add_argument("--bucket", help="only this bucket")


@dataclass(frozen=True, slots=True)
class Flushed:
    """The gateway's flush counters (summed over its worker processes)."""

    bytes: int
    objects: int
    dirty_bytes: int
    dirty_objects: int
    in_flight_sent: int = 0  # of the dirty bytes, those already sent (uploads in flight)

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> Flushed:
        parts = status.get("workers") or [status]
        parts = [p for p in parts if isinstance(p, Mapping)]

        def total(name: str) -> int:
            return sum(int(p.get(name) or 0) for p in parts)

        return cls(total("flush_bytes_total"), total("flushes_total"),
                   total("dirty_bytes"), total("dirty_objects"),
                   total("flush_inflight_sent_bytes"))


class Gateway:
    """Signed and unsigned requests to one gateway's admin routes."""

    def __init__(self, endpoint: str, credentials: Credentials, region: str, *,
                 verify: ssl.SSLContext | bool = True) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._signer = Signer(credentials, region, sign_payload=True)
        self._http = httpx.Client(timeout=httpx.Timeout(30.0, read=None), verify=verify)

    def close(self) -> None:
        self._http.close()

    def _signed(self, method: str, url: str) -> dict[str, str]:
        return self._signer.sign(method, url)

    def check_bucket(self, bucket: str) -> None:
        """HeadBucket: ClientFailure when it does not exist or the credentials are
        refused."""
        url = f"{self.endpoint}/{urllib.parse.quote(bucket, safe='')}"
        with reaching(self.endpoint):
            response = self._http.head(url, headers=self._signed("HEAD", url))
        if response.status_code == 404:
            raise ClientFailure(f"no such bucket {bucket!r} at {self.endpoint}")
        if response.status_code in (400, 403):  # a HEAD's answer has no error code
            raise ClientFailure(f"the gateway refused the credentials "
                                f"({response.status_code} for HeadBucket {bucket!r}): "
                                f"{CREDENTIALS_HINT}")
        if response.status_code != 200:
            raise ClientFailure(f"HeadBucket {bucket!r} answered {response.status_code}")

    def flushed(self) -> Flushed | None:
        """The flush counters now, None when the gateway does not report them."""
        try:
            url = f"{self.endpoint}/_squall/status?workers=all"
            response = self._http.get(url, headers=self._signed("GET", url), timeout=10.0)
            status = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        return Flushed.of(status) if isinstance(status, Mapping) else None

    def sync(self, bucket: str | None) -> Iterator[dict[str, Any]]:
        """POST /_squall/sync: its NDJSON lines (progress, then the outcome)."""
        query = f"?{urllib.parse.urlencode({'bucket': bucket})}" if bucket else ""
        url = f"{self.endpoint}/_squall/sync{query}"
        with reaching(self.endpoint), self._http.stream(
                "POST", url, headers=self._signed("POST", url), content=b"") as response:
            if response.status_code != 200:
                response.read()
                raise Refused.of(response)
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)


class Progress:
    """What is left, the rate and the time to go, written to ``out``."""

    def __init__(self, gateway: Gateway, out: TextIO, *, whole_gateway: bool,
                 start: Flushed | None) -> None:
        self._gateway = gateway
        self._out = out
        self._tty = out.isatty()
        self._whole = whole_gateway
        self._start = start
        self._t0 = self._polled = time.monotonic()
        self._shown = float("-inf")  # the first line at once
        self._now = start
        self._drawn = False

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        interval = TTY_INTERVAL_S if self._tty else LOG_INTERVAL_S
        if now - self._shown < interval:
            return
        self._shown = now
        if now - self._polled >= STATUS_INTERVAL_S or self._now is None:
            self._polled = now
            self._now = self._gateway.flushed() or self._now
        self._write(self._line(done, total, now - self._t0))

    def _line(self, done: int, total: int, elapsed: float) -> str:
        left_bytes = max(0, total - done)
        objects = ""
        if self._whole and self._now is not None:
            left_bytes = max(left_bytes, self._now.dirty_bytes - self._now.in_flight_sent)
            objects = f" in {self._now.dirty_objects} object(s)"
        flushed = done
        if self._start is not None and self._now is not None:
            flushed = max(done, self._now.bytes - self._start.bytes)
        rate = flushed / elapsed if elapsed > 0 else 0.0
        eta = f", about {format_duration(left_bytes / rate)} to go" if rate > 0 and left_bytes \
            else ""
        return (f"squall sync: {format_bytes(left_bytes)} left{objects}, "
                f"{format_bytes(flushed)} flushed, {format_bytes(rate)}/s{eta}")

    def _write(self, line: str) -> None:
        if self._tty:
            print(f"\r\x1b[2K{line}", end="", file=self._out, flush=True)
            self._drawn = True
        else:
            print(line, file=self._out, flush=True)

    def finish(self) -> None:
        if self._drawn:
            print("\r\x1b[2K", end="", file=self._out, flush=True)


def run(args: argparse.Namespace) -> int:
    return exit_status(NAME, lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    gateway = Gateway(args.endpoint, credentials_from_env(), args.region,
                      verify=endpoint_context(args.ca_bundle))
    try:
        return _sync(gateway, args.bucket)
    finally:
        gateway.close()


def _sync(gateway: Gateway, bucket: str | None) -> int:
    if bucket:
        gateway.check_bucket(bucket)
    before = gateway.flushed()
    t0 = time.monotonic()
    progress = Progress(gateway, sys.stderr, whole_gateway=not bucket, start=before)
    last: dict[str, Any] = {}
    try:
        for last in gateway.sync(bucket):
            if "flushed" not in last:
                progress.update(int(last.get("done", 0)), int(last.get("total", 0)))
    finally:
        progress.finish()
    if last.get("flushed") is not True:
        message = (f"not flushed: {last.get('error')}: {last.get('message')}" if last
                   else "the gateway ended the sync without an outcome")
        print(f"{NAME}: {message}", file=sys.stderr)
        for held in last.get("quarantined", []):
            print(f"  {held['bucket']}/{held['key']}: {held['error']} "
                  f"({held['attempts']} attempts)", file=sys.stderr)
        return 1
    print(_summary(bucket, before, gateway.flushed(), int(last.get("total", 0)),
                   time.monotonic() - t0))
    return 0


def _summary(bucket: str | None, before: Flushed | None, after: Flushed | None,
             watched: int, elapsed: float) -> str:
    """``flushed: ...``: what reached the backend while the sync ran."""
    where = f" of bucket {bucket}" if bucket else ""
    if before is not None and after is not None:
        size, count = after.bytes - before.bytes, after.objects - before.objects
        flushed = f"{format_bytes(size)} in {count} object(s)"
    else:
        size, flushed = watched, format_bytes(watched)
    rate = f", {format_bytes(size / elapsed)}/s" if elapsed > 0 and size else ""
    return (f"flushed: {flushed} during this sync ({elapsed:.1f} s{rate}); everything "
            f"dirty{where} is on the backend")
