"""Request headers -> own types, and object info -> response headers."""

from __future__ import annotations

import base64
import binascii
import email.utils
import re
import urllib.parse
from collections.abc import Mapping

from backends.core.base import DEFAULT_CONTENT_TYPE, ObjectInfo, ObjectMeta, RangeRequest
from backends.core.errors import InvalidDigest
from backends.core.numbers import natural
from backends.core.upload_checksums import UPLOAD_CHECKSUM, checksum_type
from backends.multipart import COMPLETED_UPLOAD, PART_CHECKSUMS, PART_LAYOUT
from gateway.auth.acl import ACL_METADATA
from gateway.protocol.conditions import Conditions
from gateway.protocol.errors import (
    InvalidArgument,
    InvalidCopySource,
    InvalidRedirectLocation,
    InvalidStorageClass,
    InvalidTag,
    MetadataTooLarge,
)
from gateway.service.objects import CopySource

MAX_USER_METADATA = 2048
#: the object's ``x-amz-website-redirect-location`` and (when not STANDARD) its
#: ``x-amz-storage-class``, kept among its user metadata so that every layer stores them
WEBSITE_REDIRECT = "squall-website-redirect"
STORAGE_CLASS = "squall-storage-class"
# User-metadata entries Squall keeps for itself: never shown, never taken from a client.
RESERVED_METADATA = frozenset({PART_LAYOUT, PART_CHECKSUMS, COMPLETED_UPLOAD, UPLOAD_CHECKSUM,
                               ACL_METADATA, WEBSITE_REDIRECT, STORAGE_CLASS})
#: S3's storage classes: each is recorded and reported; every object is served at once
#: (there is no archive tier to restore from)
STORAGE_CLASSES = frozenset({"STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA",
                             "INTELLIGENT_TIERING", "GLACIER", "DEEP_ARCHIVE", "OUTPOSTS",
                             "GLACIER_IR", "SNOW", "EXPRESS_ONEZONE"})
MAX_REDIRECT_LOCATION = 2048
MAX_TAGS = 10
_RANGE_RE = re.compile(r"bytes=([0-9]*)-([0-9]*)")
_CONTENT_HEADERS = (
    ("content-encoding", "content_encoding"),
    ("content-disposition", "content_disposition"),
    ("content-language", "content_language"),
    ("cache-control", "cache_control"),
    ("expires", "expires"),
)
#: what an HTTP header value cannot hold (control characters but HTAB; the server refuses
#: to send them, and CR/LF would end the header)
_UNSENDABLE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
RESPONSE_OVERRIDES = {
    "response-content-type": "content-type",
    "response-content-language": "content-language",
    "response-expires": "expires",
    "response-cache-control": "cache-control",
    "response-content-disposition": "content-disposition",
    "response-content-encoding": "content-encoding",
}


def header_value(name: str, value: str) -> str:
    """``value`` (of the parameter ``name``) if it can be sent as an HTTP header value:
    ISO-8859-1 and no control characters; InvalidArgument otherwise, as S3 answers."""
    if not value.isascii():
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise InvalidArgument(f"Header value cannot be represented using ISO-8859-1 "
                                  f"({name}).") from None
    if _UNSENDABLE.search(value):
        raise InvalidArgument(f"Header value contains a control character ({name}).")
    return value


def _content_encoding(value: str | None) -> str | None:
    if value is None:
        return None
    kept = [v.strip() for v in value.split(",") if v.strip() and v.strip() != "aws-chunked"]
    return ", ".join(kept) or None


def object_meta(headers: Mapping[str, str], *, with_tags: bool = True) -> ObjectMeta:
    """ObjectMeta from PutObject / CreateMultipartUpload / CopyObject(REPLACE) headers."""
    user = {name[11:]: value for name, value in headers.items()
            if name.startswith("x-amz-meta-") and name[11:] not in RESERVED_METADATA}
    if sum(len(k) + len(v) for k, v in user.items()) > MAX_USER_METADATA:
        raise MetadataTooLarge(f"Your metadata headers exceed the maximum allowed metadata "
                               f"size of {MAX_USER_METADATA} bytes.")
    user.update(_stored_headers(headers))
    values = {attr: headers.get(name) for name, attr in _CONTENT_HEADERS}
    values["content_encoding"] = _content_encoding(values["content_encoding"])
    tags = parse_tagging_header(headers.get("x-amz-tagging")) if with_tags else {}
    return ObjectMeta(content_type=headers.get("content-type") or DEFAULT_CONTENT_TYPE,
                      user=user, tags=tags, **values)  # type: ignore[arg-type]


def _stored_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The redirect location and storage class a write asks for, checked as S3 does."""
    out = {}
    redirect = headers.get("x-amz-website-redirect-location")
    if redirect is not None:
        if not redirect.startswith(("/", "http://", "https://")) or \
                len(redirect) > MAX_REDIRECT_LOCATION:
            raise InvalidRedirectLocation()
        out[WEBSITE_REDIRECT] = redirect
    storage_class = check_storage_class(headers)
    if storage_class is not None and storage_class != "STANDARD":
        out[STORAGE_CLASS] = storage_class
    return out


def check_storage_class(headers: Mapping[str, str]) -> str | None:
    """The ``x-amz-storage-class`` a request names, if any; InvalidStorageClass for one S3
    does not know (also on a CopyObject that keeps the source's metadata)."""
    storage_class = headers.get("x-amz-storage-class")
    if storage_class is not None and storage_class not in STORAGE_CLASSES:
        raise InvalidStorageClass()
    return storage_class


def storage_class(meta: ObjectMeta) -> str:
    """The object's storage class (STANDARD unless the write named another)."""
    return meta.user.get(STORAGE_CLASS, "STANDARD")


def check_tags(tags: Mapping[str, str], *, limit: int = MAX_TAGS,
               what: str = "Object") -> None:
    if len(tags) > limit:
        raise InvalidTag(f"{what} tags cannot be greater than {limit}")
    for key, value in tags.items():
        if not key or len(key) > 128:
            raise InvalidTag("The TagKey you have provided is invalid")
        if len(value) > 256:
            raise InvalidTag("The TagValue you have provided is invalid")
        if key.startswith("aws:"):
            raise InvalidTag("Your TagKey cannot be prefixed with aws:")


def parse_tagging_header(value: str | None) -> dict[str, str]:
    if not value:
        return {}
    try:
        pairs = urllib.parse.parse_qsl(value, keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise InvalidTag("The TagValue you have provided is invalid") from None
    tags = dict(pairs)
    if len(tags) != len(pairs):
        raise InvalidTag("Cannot provide multiple Tags with the same key")
    check_tags(tags)
    return tags


def content_md5(headers: Mapping[str, str]) -> bytes | None:
    value = headers.get("content-md5")
    if value is None:
        return None
    try:
        digest = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        digest = b""
    if len(digest) != 16:
        raise InvalidDigest("The Content-MD5 you specified is not valid.")
    return digest


def byte_range(value: str | None) -> RangeRequest | None:
    """A single ``bytes=`` range; anything unparsable (a number of more than
    ``MAX_DIGITS`` digits too) is ignored, as S3 does."""
    if not value:
        return None
    m = _RANGE_RE.fullmatch(value.strip())
    if not m:
        return None
    first, last = m.group(1), m.group(2)
    start, end = natural(first), natural(last)  # None for ""
    if (first and start is None) or (last and end is None) or (start is None and end is None):
        return None
    if start is None:
        return RangeRequest(suffix=end)
    if end is not None and end < start:
        return None
    return RangeRequest(first=start, last=end)


def http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


def format_http_date(epoch: float) -> str:
    return email.utils.formatdate(epoch, usegmt=True)


def conditions(headers: Mapping[str, str], prefix: str = "") -> Conditions:
    return Conditions(
        if_match=headers.get(f"{prefix}if-match"),
        if_none_match=headers.get(f"{prefix}if-none-match"),
        if_modified_since=http_date(headers.get(f"{prefix}if-modified-since")),
        if_unmodified_since=http_date(headers.get(f"{prefix}if-unmodified-since")),
    )


def copy_source(headers: Mapping[str, str]) -> CopySource:
    raw = headers["x-amz-copy-source"]
    path, _, query = raw.partition("?")
    decoded = urllib.parse.unquote(path).lstrip("/")
    bucket, _, key = decoded.partition("/")
    if not bucket or not key:
        raise InvalidCopySource()
    version_id = None
    if query:
        values = urllib.parse.parse_qs(query, keep_blank_values=True).get("versionId")
        if values is not None:
            version_id = values[0]
            if not version_id:
                raise InvalidArgument("Version id cannot be the empty string")
    range_header = headers.get("x-amz-copy-source-range")
    src_range = None
    if range_header is not None:
        src_range = byte_range(range_header)
        if src_range is None or src_range.suffix is not None or src_range.last is None:
            raise InvalidArgument("The x-amz-copy-source-range value must be of the form "
                                  "bytes=first-last where first and last are the zero-based "
                                  "offsets of the first and last bytes to copy")
    return CopySource(bucket, key, conditions(headers, "x-amz-copy-source-"), src_range,
                      version_id)


def not_modified_headers(info: ObjectInfo) -> dict[str, str]:
    """What a 304 carries: the validators and caching headers a 200 would have sent."""
    out = {"etag": f'"{info.etag}"', "last-modified": format_http_date(info.last_modified)}
    if info.version_id is not None:
        out["x-amz-version-id"] = info.version_id
    if info.meta.cache_control is not None:
        out["cache-control"] = info.meta.cache_control
    if info.meta.expires is not None:
        out["expires"] = info.meta.expires
    return out


def object_headers(info: ObjectInfo, *, checksum_mode: bool = False) -> dict[str, str]:
    """Response headers describing ``info`` (GET and HEAD)."""
    meta = info.meta
    out = {
        "etag": f'"{info.etag}"',
        "last-modified": format_http_date(info.last_modified),
        "content-type": meta.content_type,
        "accept-ranges": "bytes",
    }
    if info.version_id is not None:
        out["x-amz-version-id"] = info.version_id
    for name, attr in _CONTENT_HEADERS:
        value = getattr(meta, attr)
        if value is not None:
            out[name] = value
    for name, value in meta.user.items():
        if name not in RESERVED_METADATA:
            out[f"x-amz-meta-{name}"] = value
    if WEBSITE_REDIRECT in meta.user:
        out["x-amz-website-redirect-location"] = meta.user[WEBSITE_REDIRECT]
    if STORAGE_CLASS in meta.user:  # S3 sends none for STANDARD
        out["x-amz-storage-class"] = meta.user[STORAGE_CLASS]
    if meta.tags:
        out["x-amz-tagging-count"] = str(len(meta.tags))
    if checksum_mode and meta.checksum is not None:
        algorithm, value = meta.checksum
        out[f"x-amz-checksum-{algorithm.lower()}"] = value
        out["x-amz-checksum-type"] = checksum_type(value)
    return out
