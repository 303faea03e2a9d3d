"""A lighter path for the mount's hottest requests, PutObject of a whole file held in
memory, UploadPart of a block, HeadObject, ranged GetObject and ListObjectsV2 pages: signed
by the clients' own signer (:mod:`gateway.client.sigv4`, a sixth of botocore's cost per
request) and sent over a urllib3 pool, without botocore's request pipeline (serialisation,
event hooks, response parsing and, for a missing key, its exceptions): that pipeline was
three quarters of the mount's CPU per small file, and its parser ~70 µs per key listed
(ElementTree's here: a few).

Object requests go to the key's owner when the mount routes them in a cluster
(:mod:`gateway.fuse_mount.routing`), each signed for the owner's host; listings go to the
endpoint.

Only the plain outcomes are handled here: a stored object, a HEAD's 200 or 404, a GET's
206 of exactly the range asked for. Anything else (another status, a dropped connection,
a timeout, a short body) returns None (or False) and the caller sends the same request
through boto3, whose retries and error translation then decide the outcome exactly as for
every other request.
"""

from __future__ import annotations

import datetime
import email.utils
import http.client
import logging
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import urllib3

from gateway.client.credentials import Credentials
from gateway.client.sigv4 import Signer
from gateway.fuse_mount.routing import OwnerRouter

log = logging.getLogger(__name__)

_META = "x-amz-meta-"
# An error body up to this size is read to keep its connection; a larger one is closed.
_DRAIN_LIMIT = 64 * 1024
_SKIP_PIECE = 256 * 1024  # bytes of a body dropped per read

#: What a HEAD found: (size, ETag, mtime, user metadata), or MISSING (404).
Head = tuple[int, str, float, dict[str, str]]
MISSING = "missing"
#: One ListObjectsV2 page: (key, size, ETag, mtime) of its objects, its common prefixes,
#: whether it is truncated and the continuation token of the next page.
ListPage = tuple[list[tuple[str, int, str, float]], list[str], bool, str | None]
# Hosts whose connection pools are kept (the endpoint and the cluster's members).
_POOLS = 64


class LightRequests:
    """PutObject, UploadPart, HeadObject and ranged GetObject on one bucket (thread-safe)."""

    def __init__(self, endpoint: str, bucket: str, credentials: Credentials, *,
                 region: str, pool_size: int, connect_timeout: float,
                 read_timeout: float, ca_bundle: Path | None = None,
                 router: OwnerRouter | None = None) -> None:
        """``router``: where each object request goes (None: the endpoint); a pool of
        up to ``pool_size`` connections is kept per host."""
        self._bucket = bucket
        self._path = "/" + urllib.parse.quote(bucket, safe="") + "/"
        self._base = endpoint.rstrip("/") + self._path
        self._router = router
        # Bodies are not signed (UNSIGNED-PAYLOAD): the gateway verifies their CRC32C
        # header, as for boto3's requests.
        self._signer = Signer(credentials, region)
        tls: dict[str, Any] = {"ca_certs": str(ca_bundle)} if ca_bundle is not None else {}
        self._pool = urllib3.PoolManager(
            num_pools=_POOLS, maxsize=pool_size, block=False, retries=False,
            timeout=urllib3.Timeout(connect=connect_timeout, read=read_timeout), **tls)

    def put(self, key: str, data: bytes | bytearray, metadata: Mapping[str, str],
            crc32c: str) -> str | None:
        """The new object's ETag, or None when the request did not succeed (or cannot be
        sent this way: metadata that is not ASCII); the caller then uses boto3."""
        headers = {}
        for name, value in metadata.items():
            if not (name.isascii() and value.isascii()):
                return None
            headers[_META + name] = value
        return self._put(key, data, crc32c, headers)

    def upload_part(self, key: str, upload_id: str, number: int, data: bytes | bytearray,
                    crc32c: str) -> str | None:
        """The part's ETag, or None when the request did not succeed (the caller then
        uses boto3)."""
        query = urllib.parse.urlencode({"partNumber": number, "uploadId": upload_id})
        return self._put(key, data, crc32c, {}, query=query)

    def _put(self, key: str, data: bytes | bytearray, crc32c: str, headers: dict[str, str],
             *, query: str = "") -> str | None:
        headers |= {"Content-Length": str(len(data)), "x-amz-checksum-crc32c": crc32c}
        # urllib3 sends a bytearray as a memoryview of it (no copy).
        response = self._send("PUT", key, headers, data, query=query)
        if response is None or response.status != 200:
            return None
        return str(response.headers.get("ETag", ""))

    def head(self, key: str) -> Head | str | None:
        """The object's size, ETag, mtime and user metadata; MISSING on a 404; None for
        anything else (the caller then uses boto3)."""
        response = self._send("HEAD", key, {}, None)
        if response is None:
            return None
        if response.status == 404:
            return MISSING
        h = response.headers
        try:
            if response.status != 200:
                raise ValueError(response.status)
            mtime = email.utils.parsedate_to_datetime(h["Last-Modified"]).timestamp()
            size = int(h["Content-Length"])
        except (KeyError, TypeError, ValueError):
            return None
        metadata = {k[len(_META):]: v for k, v in h.items()
                    if k.lower().startswith(_META)}
        return size, str(h.get("ETag", "")), mtime, metadata

    def get_range(self, key: str, start: int, end: int, *, if_match: str | None
                  ) -> bytes | None:
        """Bytes ``[start, end)`` of the object (``If-Match``: ``if_match``), or None for
        anything but a 206 of exactly that range (the caller then uses boto3)."""
        response = self._ranged(key, start, end, if_match)
        if response is None:
            return None
        try:
            data = response.read()
        except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError) as exc:
            _failed(response, key, exc)
            return None
        if len(data) != end - start:
            _failed(response, key, f"{len(data)} bytes of {end - start}")
            return None
        return data

    def list_page(self, prefix: str, delimiter: str, max_keys: int, token: str | None
                  ) -> ListPage | None:
        """One page of ListObjectsV2; None for anything but a 200 with a document of the
        expected shape (the caller then uses boto3)."""
        params = {"list-type": "2", "prefix": prefix, "max-keys": str(max_keys),
                  "encoding-type": "url"}
        if delimiter:
            params["delimiter"] = delimiter
        if token:
            params["continuation-token"] = token
        query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
        response = self._send("GET", "", {}, None, query=query)
        if response is None or response.status != 200:
            return None
        try:
            return _list_page(response.data)
        except (ElementTree.ParseError, TypeError, ValueError) as exc:
            log.debug("ListObjectsV2 %r: %s; sending it again through boto3", prefix, exc)
            return None

    def get_into(self, key: str, start: int, into: memoryview, *, if_match: str | None
                 ) -> bool:
        """Fill ``into`` with bytes ``[start, start + len(into))`` of the object, read from
        the socket straight into it (no intermediate bytes object); False for anything but
        a 206 of exactly that range, whole (the caller then uses boto3)."""
        body = self.open_range(key, start, start + len(into), if_match=if_match)
        return body is not None and body.read_into(into)

    def open_range(self, key: str, start: int, end: int, *, if_match: str | None
                   ) -> RangeBody | None:
        """A GET of bytes ``[start, end)`` whose body is still on its socket, to be read in
        order with :meth:`RangeBody.read_into`; None for anything but a 206 of exactly that
        range (the caller then uses boto3)."""
        response = self._ranged(key, start, end, if_match)
        return RangeBody(response, key, end - start) if response is not None else None

    def _ranged(self, key: str, start: int, end: int, if_match: str | None
                ) -> urllib3.HTTPResponse | None:
        """A GET of ``[start, end)`` whose body is still to be read: only a 206 of exactly
        that range, with a plain body of its length; None otherwise (connection released)."""
        headers = {"Range": f"bytes={start}-{end - 1}"}
        if if_match:
            headers["If-Match"] = if_match
        response = self._send("GET", key, headers, None, preload=False)
        if response is None:
            return None
        h = response.headers
        if (isinstance(response, urllib3.HTTPResponse) and response.status == 206
                and h.get("Content-Length") == str(end - start)
                and h.get("Content-Range", "").startswith(f"bytes {start}-{end - 1}/")
                and h.get("Content-Encoding", "identity") == "identity"
                and "Transfer-Encoding" not in h):
            return response
        log.debug("GET %s bytes %d-%d: status %d; sending it again through boto3",
                  key, start, end - 1, response.status)
        _discard(response)
        return None

    def _send(self, method: str, key: str, headers: dict[str, str],
              body: bytes | bytearray | None, *, preload: bool = True, query: str = ""
              ) -> urllib3.BaseHTTPResponse | None:
        target = urllib.parse.quote(key, safe="/~") + (f"?{query}" if query else "")
        router = self._router if key else None  # listings stay with the endpoint
        url = (router.owner(self._bucket, key) + self._path if router is not None
               else self._base) + target
        try:
            # Signed for the URL's host (the owner's, when routed): SigV4 covers Host.
            return self._pool.request(method, url, body=body,  # type: ignore[arg-type]
                                      headers=self._signer.sign(method, url, headers),
                                      preload_content=preload, redirect=False)
        except urllib3.exceptions.HTTPError as exc:
            log.debug("%s %s: %s; sending it again through boto3", method, url, exc)
            if router is not None:
                router.suspect()
            return None


class RangeBody:
    """The body of a ranged GET, still on its socket: read in order, each piece straight
    into the caller's buffer (``recv_into`` of http.client's response under urllib3's:
    urllib3's own ``readinto`` reads into a new bytes object and copies it). Its
    connection goes back to the pool once the body is read to its end, and is closed if
    the body is dropped before (:meth:`close`) or breaks off."""

    __slots__ = ("_key", "_raw", "_response", "left")

    def __init__(self, response: urllib3.HTTPResponse, key: str, length: int) -> None:
        self._response = response
        self._raw = getattr(response, "_fp", None)
        self._key = key
        self.left = length

    def read_into(self, into: memoryview) -> bool:
        """Fill ``into`` with the next ``len(into)`` bytes of the body; False (and the
        connection closed) when the body broke off or has fewer bytes left."""
        size = len(into)
        if size > self.left:
            self.close()
            return False
        got = 0
        try:
            while self._raw is not None and got < size:
                if not (n := self._raw.readinto(into[got:])):
                    break
                got += n
        except (OSError, http.client.HTTPException) as exc:
            self._break(exc)
            return False
        if got != size:
            self._break(f"{got} bytes of {size}")
            return False
        self.left -= size
        if not self.left:
            self._response.release_conn()
        return True

    def skip(self, count: int) -> bool:
        """Drop the next ``count`` bytes of the body (read in pieces); as ``read_into``."""
        scratch = memoryview(bytearray(min(count, _SKIP_PIECE)))
        while count > 0:
            piece = min(count, len(scratch))
            if not self.read_into(scratch[:piece]):
                return False
            count -= piece
        return True

    def close(self) -> None:
        """Drop the rest of the body (its connection is closed)."""
        if self.left:
            self.left = 0
            self._response.close()
            self._response.release_conn()

    def _break(self, reason: object) -> None:
        self.left = 0
        _failed(self._response, self._key, reason)


def _list_page(document: bytes) -> ListPage:
    """The objects, prefixes, truncation and next token of a ListObjectsV2 document (names
    URL-encoded when its EncodingType says so); TypeError or ValueError when a field is
    missing or malformed."""
    root = ElementTree.fromstring(document)
    ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    if root.tag != ns + "ListBucketResult":
        raise ValueError(f"not a listing: {root.tag}")

    def text(element: ElementTree.Element, name: str) -> str:
        found = element.findtext(ns + name)
        if found is None:
            raise ValueError(f"no {name}")
        return found

    decode = urllib.parse.unquote if root.findtext(ns + "EncodingType") == "url" else str
    objects = [(decode(text(c, "Key")), int(text(c, "Size")), c.findtext(ns + "ETag") or "",
                datetime.datetime.fromisoformat(text(c, "LastModified")).timestamp())
               for c in root.iterfind(ns + "Contents")]
    prefixes = [decode(text(p, "Prefix")) for p in root.iterfind(ns + "CommonPrefixes")]
    truncated = root.findtext(ns + "IsTruncated") == "true"
    return objects, prefixes, truncated, root.findtext(ns + "NextContinuationToken")


def _discard(response: urllib3.BaseHTTPResponse) -> None:
    """Give a response's connection back: a small body read to the end, a larger (or
    unknown) one closed."""
    try:
        if int(response.headers.get("Content-Length", _DRAIN_LIMIT + 1)) <= _DRAIN_LIMIT:
            response.drain_conn()
            return
    except (ValueError, OSError, http.client.HTTPException, urllib3.exceptions.HTTPError):
        pass
    response.close()
    response.release_conn()


def _failed(response: urllib3.BaseHTTPResponse, key: str, reason: object) -> None:
    """A body that broke off: its connection is closed (the caller then uses boto3)."""
    log.debug("GET %s: %s; sending it again through boto3", key, reason)
    response.close()
    response.release_conn()
