"""The narrow, blocking S3 client the mount uses (boto3 underneath, thread-safe).

Every method raises the typed errors of :mod:`gateway.fuse_mount.errors`; no SDK dict
leaves this module.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.utils import parse_timestamp

from backends.core.checksums import new_hasher
from backends.core.errors import BackendError, NoSuchKey
from gateway.client.credentials import Credentials
from gateway.client.sigv4 import DEFAULT_REGION
from gateway.cluster.client import route_to_owners
from gateway.fuse_mount.errors import translate
from gateway.fuse_mount.gateway_clock import GatewayClock
from gateway.fuse_mount.light import MISSING, LightRequests, ListPage, RangeBody
from gateway.fuse_mount.routing import OwnerRouter

Body = bytes | bytearray
_SENT = "squall_sent_at"  # key of a request's botocore context: when it was sent
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RemoteObject:
    """What HeadObject or a listing tells about one object."""

    key: str
    size: int
    etag: str
    mtime: float
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Part:
    """One uploaded part of a multipart upload: what CompleteMultipartUpload needs."""

    number: int
    etag: str
    crc32c: str | None = None  # base64, when known


@dataclass(frozen=True, slots=True)
class RemoteListing:
    """One page of a delimited listing: objects and common prefixes (``dir/``)."""

    objects: tuple[RemoteObject, ...]
    prefixes: tuple[str, ...]
    truncated: bool = False


class BucketClient:
    """Blocking S3 operations on one bucket."""

    def __init__(self, endpoint: str, bucket: str, credentials: Credentials, *,
                 region: str = DEFAULT_REGION, max_attempts: int = 5,
                 connect_timeout: float = 10.0, pool_size: int = 32,
                 ca_bundle: Path | None = None, light_requests: bool = True,
                 router: OwnerRouter | None = None) -> None:
        """``light_requests``: send ``put``, ``upload_part``, ``head``, ranged GETs and
        listing pages through :class:`LightRequests` first. ``router``: object requests
        (of both paths) go to their key's owner in a cluster; bucket-level requests and
        listings to ``endpoint``."""
        self.bucket = bucket
        #: the gateway's time, from the Date of every answer to a boto3 request
        self.clock = GatewayClock()
        self._light = LightRequests(endpoint, bucket, credentials, region=region,
                                    pool_size=pool_size, connect_timeout=connect_timeout,
                                    read_timeout=120, ca_bundle=ca_bundle,
                                    router=router) if light_requests else None
        session = boto3.session.Session()
        session._session.get_component("response_parser_factory").set_parser_defaults(
            timestamp_parser=_timestamp)
        self._client: Any = session.client(
            "s3", endpoint_url=endpoint, region_name=region,
            aws_access_key_id=credentials.access_key,
            aws_secret_access_key=credentials.secret_key,
            aws_session_token=credentials.token,
            verify=str(ca_bundle) if ca_bundle is not None else None,
            # Bodies carry a CRC32C (computed here, see _crc32c) that the gateway verifies,
            # not a SHA-256 of every part (botocore's default over plain HTTP, and costly).
            config=Config(signature_version="s3v4",
                          s3={"addressing_style": "path", "payload_signing_enabled": False},
                          retries={"mode": "standard", "max_attempts": max_attempts},
                          connect_timeout=connect_timeout, read_timeout=120,
                          max_pool_connections=pool_size,
                          request_checksum_calculation="when_supported",
                          response_checksum_validation="when_required"))
        events = self._client.meta.events
        events.register("before-call.s3", _note_sent)
        events.register("after-call.s3", self._observe_date)
        if router is not None:
            route_to_owners(self._client, router.owner)

    def _observe_date(self, http_response: Any, context: dict[str, Any],
                      **_: Any) -> None:
        """botocore's after-call (errors too): the Date for the gateway's clock."""
        if http_response is not None and _SENT in context:
            self.clock.observe(context[_SENT], time.time(), http_response.headers.get("Date"))

    @property
    def client(self) -> Any:
        """The boto3 S3 client (its event hooks may be extended)."""
        return self._client

    def check_bucket(self) -> None:
        """HeadBucket: raises if the bucket is missing, access denied or endpoint down
        (and logs nothing: the caller explains)."""
        with translate("HeadBucket", self.bucket, quiet=True):
            try:
                self._client.head_bucket(Bucket=self.bucket)
            except self._client.exceptions.ClientError as exc:
                if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                    exc.response.setdefault("Error", {})["Code"] = "NoSuchBucket"
                raise

    def head(self, key: str) -> RemoteObject:
        if self._light is not None:
            found = self._light.head(key)
            if found == MISSING:  # as translate raises it (quietly) from boto3's 404
                log.debug("HeadObject %s/%s failed: 404", self.bucket, key)
                raise NoSuchKey(self.bucket, key)
            if isinstance(found, tuple):
                return RemoteObject(key, *found)
        with translate("HeadObject", self.bucket, key):
            r = self._client.head_object(Bucket=self.bucket, Key=key)
        return RemoteObject(key, int(r["ContentLength"]), r.get("ETag", ""),
                          r["LastModified"].timestamp(), dict(r.get("Metadata") or {}))

    def get_range(self, key: str, start: int, end: int, *, if_match: str | None = None
                  ) -> bytes:
        """Bytes ``[start, end)`` of the object (``end`` is exclusive)."""
        if end <= start:
            return b""
        if self._light is not None:
            data = self._light.get_range(key, start, end, if_match=if_match)
            if data is not None:
                return data
        return self._get_range_boto3(key, start, end, if_match=if_match)

    def get_into(self, key: str, start: int, into: memoryview, *,
                 if_match: str | None = None) -> None:
        """Fill ``into`` with bytes ``[start, start + len(into))`` of the object: on the
        light path read from the socket straight into it, else through boto3 (then copied).
        A body of another length than asked for is a BackendError (EIO)."""
        if not into:
            return
        if self._light is not None and self._light.get_into(key, start, into,
                                                            if_match=if_match):
            return
        data = self._get_range_boto3(key, start, start + len(into), if_match=if_match)
        if len(data) != len(into):
            raise BackendError(f"GetObject {self.bucket}/{key}: {len(data)} bytes for a "
                               f"range of {len(into)} at {start}")
        into[:] = data

    @property
    def streams(self) -> bool:
        """Whether :meth:`open_range` can stream (the light request path is on)."""
        return self._light is not None

    def open_range(self, key: str, start: int, end: int, *, if_match: str | None = None
                   ) -> RangeBody | None:
        """A GET of bytes ``[start, end)`` whose body stays on its socket, read in order
        straight into the caller's buffers; None when that is not possible (no light
        request path, or an answer other than a plain 206 of that range: the caller then
        uses :meth:`get_range`, which raises what the answer means)."""
        if self._light is None or end <= start:
            return None
        return self._light.open_range(key, start, end, if_match=if_match)

    def _get_range_boto3(self, key: str, start: int, end: int, *,
                         if_match: str | None) -> bytes:
        extra = {"IfMatch": if_match} if if_match else {}
        with translate("GetObject", self.bucket, key):
            r = self._client.get_object(Bucket=self.bucket, Key=key,
                                        Range=f"bytes={start}-{end - 1}", **extra)
            with r["Body"] as body:
                return bytes(body.read())

    def put(self, key: str, data: Body, metadata: Mapping[str, str]) -> str:
        crc = _crc32c(data)
        if self._light is not None:
            etag = self._light.put(key, data, metadata, crc)
            if etag is not None:
                return etag
        with translate("PutObject", self.bucket, key):
            r = self._client.put_object(Bucket=self.bucket, Key=key, Body=data,
                                        Metadata=dict(metadata), ChecksumCRC32C=crc)
        return str(r.get("ETag", ""))

    def get_small(self, key: str) -> tuple[bytes, str]:
        """A small object whole, with its ETag (NoSuchKey if missing; logged quietly)."""
        with translate("GetObject", self.bucket, key, quiet=True):
            r = self._client.get_object(Bucket=self.bucket, Key=key)
            with r["Body"] as body:
                return bytes(body.read()), str(r.get("ETag", ""))

    def put_if(self, key: str, data: Body, *, if_match: str | None = None,
               if_none_match: str | None = None) -> str:
        """PutObject only if the current ETag is ``if_match`` / no object exists
        (``if_none_match="*"``): PreconditionFailed (or NoSuchKey) otherwise, logged
        quietly (a compare-and-swap that lost is no failure)."""
        extra = {k: v for k, v in (("IfMatch", if_match), ("IfNoneMatch", if_none_match))
                 if v is not None}
        with translate("PutObject", self.bucket, key, quiet=True):
            r = self._client.put_object(Bucket=self.bucket, Key=key, Body=data,
                                        ChecksumCRC32C=_crc32c(data), **extra)
        return str(r.get("ETag", ""))

    def list_parts(self, key: str, upload_id: str) -> list[Part]:
        """Every uploaded part of a multipart upload, in order."""
        parts: list[Part] = []
        marker = 0
        while True:
            with translate("ListParts", self.bucket, key):
                r = self._client.list_parts(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                            PartNumberMarker=marker)
            parts += [Part(int(p["PartNumber"]), str(p["ETag"]), p.get("ChecksumCRC32C"))
                      for p in r.get("Parts", [])]
            if not r.get("IsTruncated"):
                return parts
            marker = int(r["NextPartNumberMarker"])

    def copy(self, source: str, key: str, *, metadata: Mapping[str, str] | None = None
             ) -> str:
        """Server-side copy; ``metadata`` replaces the source's user metadata if given."""
        extra: dict[str, Any] = {"MetadataDirective": "COPY"}
        if metadata is not None:
            extra = {"MetadataDirective": "REPLACE", "Metadata": dict(metadata)}
        with translate("CopyObject", self.bucket, key):
            r = self._client.copy_object(Bucket=self.bucket, Key=key,
                                         CopySource={"Bucket": self.bucket, "Key": source},
                                         **extra)
        return str(r.get("CopyObjectResult", {}).get("ETag", ""))

    def delete(self, key: str) -> None:
        with translate("DeleteObject", self.bucket, key):
            self._client.delete_object(Bucket=self.bucket, Key=key)

    def list_dir(self, prefix: str, *, delimiter: str = "/", max_keys: int = 1000
                 ) -> Iterator[RemoteListing]:
        """Pages of ListObjectsV2 under ``prefix`` (all of them unless ``max_keys`` < 1000)."""
        token: str | None = None
        while True:
            objects, prefixes, truncated, token = self._list_page(prefix, delimiter, max_keys,
                                                                  token)
            yield RemoteListing(tuple(RemoteObject(*o) for o in objects), tuple(prefixes),
                                truncated)
            if not truncated or not token or max_keys < 1000:
                return

    def _list_page(self, prefix: str, delimiter: str, max_keys: int, token: str | None
                   ) -> ListPage:
        if self._light is not None:
            page = self._light.list_page(prefix, delimiter, max_keys, token)
            if page is not None:
                return page
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": max_keys}
        if delimiter:
            args["Delimiter"] = delimiter
        if token:
            args["ContinuationToken"] = token
        with translate("ListObjectsV2", self.bucket, prefix):
            r = self._client.list_objects_v2(**args)
        return ([(o["Key"], int(o["Size"]), o.get("ETag", ""), o["LastModified"].timestamp())
                 for o in r.get("Contents", [])],
                [p["Prefix"] for p in r.get("CommonPrefixes", [])],
                bool(r.get("IsTruncated")), r.get("NextContinuationToken"))

    def create_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        with translate("CreateMultipartUpload", self.bucket, key):
            r = self._client.create_multipart_upload(Bucket=self.bucket, Key=key,
                                                     Metadata=dict(metadata),
                                                     ChecksumAlgorithm="CRC32C")
        return str(r["UploadId"])

    def upload_part(self, key: str, upload_id: str, number: int, data: Body) -> Part:
        crc = _crc32c(data)
        if self._light is not None:
            etag = self._light.upload_part(key, upload_id, number, data, crc)
            if etag is not None:
                return Part(number, etag, crc)
        with translate("UploadPart", self.bucket, key):
            r = self._client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id,
                                         PartNumber=number, Body=data, ChecksumCRC32C=crc)
        return Part(number, str(r["ETag"]), crc)

    def upload_part_copy(self, key: str, upload_id: str, number: int, source: str,
                         start: int, end: int, *, if_match: str) -> Part:
        """A part made of bytes ``[start, end)`` of the ``source`` version ``if_match``."""
        with translate("UploadPartCopy", self.bucket, key):
            r = self._client.upload_part_copy(
                Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number,
                CopySource={"Bucket": self.bucket, "Key": source},
                CopySourceRange=f"bytes={start}-{end - 1}", CopySourceIfMatch=if_match)
        result = r["CopyPartResult"]
        return Part(number, str(result["ETag"]), result.get("ChecksumCRC32C"))

    def complete_upload(self, key: str, upload_id: str, parts: Sequence[Part]) -> str:
        listed = [{"PartNumber": p.number, "ETag": p.etag,
                   **({"ChecksumCRC32C": p.crc32c} if p.crc32c else {})} for p in parts]
        with translate("CompleteMultipartUpload", self.bucket, key):
            r = self._client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id,
                MultipartUpload={"Parts": listed})
        return str(r.get("ETag", ""))

    def abort_upload(self, key: str, upload_id: str) -> None:
        with translate("AbortMultipartUpload", self.bucket, key):
            self._client.abort_multipart_upload(Bucket=self.bucket, Key=key,
                                                UploadId=upload_id)


def _crc32c(data: Body) -> str:
    """Base64 CRC32C of a body (hardware accelerated; the GIL is released while it runs)."""
    hasher = new_hasher("CRC32C")
    hasher.update(data)  # type: ignore[arg-type]  # awscrt takes any buffer
    return hasher.b64digest()


def _timestamp(value: str) -> datetime:
    """Timestamps of responses: ISO 8601 (listings) and RFC 1123 (headers) parsed by the
    standard library. botocore's default parser (dateutil, about 130 us per value) was
    the largest cost of a listing."""
    try:
        parsed = datetime.fromisoformat(value)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return parse_timestamp(value)


def _note_sent(context: dict[str, Any], **_: Any) -> None:
    """botocore's before-call: when the request leaves (for :class:`GatewayClock`)."""
    context[_SENT] = time.time()
