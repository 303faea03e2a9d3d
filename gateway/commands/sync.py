"""``squall sync``: wait until everything dirty at the gateway is on the backend.

While it waits it shows what is left, the flush rate and an estimated time to go (a
refreshing line on a terminal, a line every few seconds otherwise); it ends with what
was flushed during the sync. Every failure is one ``squall: ...`` line and a non-zero
exit: 1 for a refusal or an unreachable gateway, 2 for missing credentials.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

import httpx
from botocore.credentials import Credentials

from gateway.client.signing import credentials_from_env, signed_headers
from gateway.client.tls import add_ca_bundle_option, endpoint_context
from gateway.config.humanize import format_bytes, format_duration

#: seconds between two progress lines when stderr is not a terminal
LOG_INTERVAL_S = 5.0
#: seconds between two refreshes of the progress line on a terminal
TTY_INTERVAL_S = 0.5
#: seconds between two reads of /_squall/status (objects left, flush rate)
STATUS_INTERVAL_S = 1.0
_AUTH_ERRORS = frozenset({"SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied"})


class SyncFailed(Exception):
    """Why the sync could not be done (one line)."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("sync", help="wait until all dirty data is flushed to the backend",
                       description="Return once everything that was dirty when it was "
                                   "called is on the backend, showing progress. Credentials "
                                   "as for S3 clients: SQUALL_ACCESS_KEY/SQUALL_SECRET_KEY "
                                   "or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY. Exit status: "
                                   "0 all flushed, 1 not (refused, unreachable, objects the "
                                   "backend refuses), 2 no credentials.")
    p.add_argument("--endpoint", default="http://127.0.0.1:9000", help="gateway URL")
    p.add_argument("--bucket", help="only this bucket")
    p.add_argument("--region", default="us-east-1")
    add_ca_bundle_option(p)


@dataclass(frozen=True, slots=True)
class Flushed:
    """The gateway's flush counters (summed over its worker processes)."""

    bytes: int
    objects: int
    dirty_bytes: int
    dirty_objects: int

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> Flushed:
        parts = status.get("workers") or [status]
        parts = [p for p in parts if isinstance(p, Mapping)]

        def total(name: str) -> int:
            return sum(int(p.get(name) or 0) for p in parts)

        return cls(total("flush_bytes_total"), total("flushes_total"),
                   total("dirty_bytes"), total("dirty_objects"))


class Gateway:
    """Signed and unsigned requests to one gateway's admin routes."""

    def __init__(self, endpoint: str, credentials: Credentials, region: str, *,
                 verify: ssl.SSLContext | bool = True) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._credentials = credentials
        self._region = region
        self._http = httpx.Client(timeout=httpx.Timeout(30.0, read=None), verify=verify)

    def close(self) -> None:
        self._http.close()

    def _signed(self, method: str, url: str) -> dict[str, str]:
        return signed_headers(url, self._credentials, method=method, region=self._region)

    def check_bucket(self, bucket: str) -> None:
        """HeadBucket: SyncFailed when it does not exist or the credentials are refused."""
        url = f"{self.endpoint}/{urllib.parse.quote(bucket, safe='')}"
        with _reaching(self.endpoint):
            response = self._http.head(url, headers=self._signed("HEAD", url))
        if response.status_code == 404:
            raise SyncFailed(f"no such bucket {bucket!r} at {self.endpoint}")
        if response.status_code in (400, 403):
            raise SyncFailed(f"the gateway refused the credentials "
                             f"({response.status_code} for HeadBucket {bucket!r}): check "
                             "SQUALL_ACCESS_KEY and SQUALL_SECRET_KEY")
        if response.status_code != 200:
            raise SyncFailed(f"HeadBucket {bucket!r} answered {response.status_code}")

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
        with _reaching(self.endpoint), self._http.stream(
                "POST", url, headers=self._signed("POST", url), content=b"") as response:
            if response.status_code != 200:
                response.read()
                raise SyncFailed(_refusal(response))
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)


@contextmanager
def _reaching(endpoint: str) -> Iterator[None]:
    try:
        yield
    except httpx.ConnectError as exc:
        raise SyncFailed(f"cannot reach {endpoint}: {_reason(exc)}") from exc
    except httpx.HTTPError as exc:
        raise SyncFailed(f"lost the connection to {endpoint}: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.split("] ", 1)[-1] if text.startswith("[Errno") else text


def _refusal(response: httpx.Response) -> str:
    """One line for a refused sync request, from the gateway's ``{"error", "message"}``."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or "error" not in body:
        return f"sync refused: HTTP {response.status_code}"
    code, message = str(body["error"]), str(body.get("message", "")).rstrip(".")
    hint = (" (check SQUALL_ACCESS_KEY and SQUALL_SECRET_KEY)" if code in _AUTH_ERRORS
            else "")
    return f"sync refused: {code}: {message}{hint}"


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
            left_bytes = max(left_bytes, self._now.dirty_bytes)
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
    try:
        creds = credentials_from_env()
        verify = endpoint_context(args.ca_bundle)
    except ValueError as exc:
        print(f"squall: {exc}", file=sys.stderr)
        return 2
    gateway = Gateway(args.endpoint, creds, args.region, verify=verify)
    try:
        return _sync(gateway, args.bucket)
    except SyncFailed as exc:
        print(f"squall: {exc}", file=sys.stderr)
        return 1
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
        print(f"squall: {message}", file=sys.stderr)
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
