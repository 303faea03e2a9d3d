"""A small blocking S3 client for Locust: the clients' SigV4 signer (gateway.client.sigv4),
geventhttpclient transport.

Every call is reported to Locust's ``request`` event with the S3 operation as its name
(``PutObject``, ``GetObject``...), the HTTP method as its type, the bytes carried by the
body (sent for uploads, received for downloads) and the latency until the last byte.
A status outside the expected ones is reported as a failure and raised as :class:`S3Error`,
which Locust treats as "end this task quietly" (it is already counted).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from geventhttpclient import HTTPClient
from locust.exception import RescheduleTask

from gateway.client.sigv4 import Signer, object_path, query_string
from loadtests.s3xml import ListEntry, ListV2Result, error_code, parse_list_v2

_READ_BLOCK = 1 << 20


class S3Error(RescheduleTask):
    """An S3 call ended with an unexpected status (0 when no response came back)."""

    def __init__(self, operation: str, status: int, code: str, message: str = "") -> None:
        super().__init__(f"{operation}: HTTP {status} {code} {message}".strip())
        self.operation = operation
        self.status = status
        self.code = code


@dataclass(slots=True)
class S3Response:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    nbytes: int = 0


def fire(
    request_event: Any,
    request_type: str,
    name: str,
    response_time_ms: float,
    length: int = 0,
    exception: BaseException | None = None,
    url: str | None = None,
) -> None:
    """Report one measurement to Locust's ``request`` event (its statistics and CSV files)."""
    request_event.fire(
        request_type=request_type,
        name=name,
        response_time=response_time_ms,
        response_length=length,
        response=None,
        context={},
        exception=exception,
        start_time=time.time() - response_time_ms / 1000.0,
        url=url,
    )


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0


class S3Client:
    """One persistent connection to one endpoint; not shared between greenlets."""

    def __init__(
        self, endpoint: str, signer: Signer, request_event: Any, *, timeout: float = 300.0
    ) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) endpoint URL: {endpoint!r}")
        self.endpoint = f"{parts.scheme}://{parts.netloc}"
        self._signer = signer
        self._event = request_event
        self._timeout = timeout
        self._http = self._connect()

    def _connect(self) -> HTTPClient:
        return HTTPClient.from_url(
            self.endpoint,
            concurrency=1,
            connection_timeout=self._timeout,
            network_timeout=self._timeout,
        )

    def close(self) -> None:
        self._http.close()

    def request(
        self,
        operation: str,
        method: str,
        bucket: str,
        key: str | None = None,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        expected: Collection[int] = (200,),
        keep_body: bool = False,
        name: str | None = None,
    ) -> S3Response:
        """Sign, send and time one request; report it to Locust under ``name or operation``."""
        query = query_string(params)
        uri = object_path(bucket, key) + (f"?{query}" if query else "")
        start = time.perf_counter()
        sent = len(body)
        try:
            signed = self._signer.sign(method, self.endpoint + uri, headers, body)
            with self._http.request(method, uri, body=body, headers=signed) as resp:
                status = resp.status_code
                resp_headers = {k.lower(): v for k, v in resp.items()}
                received, data = self._drain(resp, keep_body or status not in expected)
        except Exception as exc:  # connection refused/reset, timeouts: a failure, never a crash
            # the connection may be mid-request: never reuse it
            self._http.close()
            self._http = self._connect()
            fire(self._event, method, name or operation, _ms(start), sent, exc, self.endpoint)
            raise S3Error(operation, 0, type(exc).__name__, str(exc)) from exc
        response = S3Response(status, resp_headers, data, received if method == "GET" else sent)
        error: S3Error | None = None
        if status not in expected:
            error = S3Error(operation, status, error_code(data) or "UnexpectedStatus")
        fire(
            self._event,
            method,
            name or operation,
            _ms(start),
            response.nbytes,
            error,
            self.endpoint,
        )
        if error is not None:
            raise error
        return response

    @staticmethod
    def _drain(resp: Any, keep: bool) -> tuple[int, bytes]:
        if keep:
            data = resp.read()
            return len(data), data
        total = 0
        while chunk := resp.read(_READ_BLOCK):
            total += len(chunk)
        return total, b""

    # -- operations ---------------------------------------------------------------------

    def create_bucket(self, bucket: str) -> bool:
        """Create ``bucket``; True if it was created, False if this account already owns it.

        Any 409 is reported to Locust as a success; one that is not BucketAlreadyOwnedByYou
        (the name belongs to someone else) is then raised.
        """
        resp = self.request("CreateBucket", "PUT", bucket, expected=(200, 409), keep_body=True)
        if resp.status == 200:
            return True
        code = error_code(resp.body)
        if code == "BucketAlreadyOwnedByYou":
            return False
        raise S3Error("CreateBucket", resp.status, code or "UnexpectedStatus")

    def put_object(self, bucket: str, key: str, body: bytes, **kw: Any) -> S3Response:
        return self.request("PutObject", "PUT", bucket, key, body=body, **kw)

    def get_object(self, bucket: str, key: str, **kw: Any) -> S3Response:
        return self.request("GetObject", "GET", bucket, key, **kw)

    def head_object(self, bucket: str, key: str, **kw: Any) -> S3Response:
        return self.request("HeadObject", "HEAD", bucket, key, **kw)

    def delete_object(self, bucket: str, key: str, **kw: Any) -> S3Response:
        return self.request("DeleteObject", "DELETE", bucket, key, expected=(204, 200), **kw)

    def list_page(
        self,
        bucket: str,
        prefix: str = "",
        *,
        max_keys: int = 1000,
        token: str | None = None,
        name: str | None = None,
    ) -> ListV2Result:
        params = {"list-type": "2", "prefix": prefix, "max-keys": str(max_keys)}
        if token:
            params["continuation-token"] = token
        resp = self.request(
            "ListObjectsV2", "GET", bucket, params=params, keep_body=True, name=name
        )
        return parse_list_v2(resp.body)

    def list_all(
        self, bucket: str, prefix: str = "", *, name: str | None = None
    ) -> list[ListEntry]:
        """Every entry under ``prefix``, following continuation tokens."""
        entries: list[ListEntry] = []
        token: str | None = None
        while True:
            page = self.list_page(bucket, prefix, token=token, name=name)
            entries.extend(page.entries)
            if not page.truncated or not page.token:
                return entries
            token = page.token
