"""ObjectMeta <-> upstream request parameters and response fields.

Upstream user metadata (``x-amz-meta-*``) carries, besides the client's own entries:

* ``squall-checksum: ALGO:BASE64`` -- the object's full-object checksum. Squall keeps it
  here rather than as a native upstream checksum: the S3 layer has already verified it,
  upstreams differ in the algorithms they support (CRC64NVME, composite vs full-object),
  and this way any algorithm of :data:`backends.core.base.CHECKSUM_ALGORITHMS` round-trips.
* ``squall-etag: HEX`` -- the object's ETag as Squall reports it, when it differs from the
  upstream ETag (an object PUT through a multipart upload upstream; copies of it).
* ``squall-expires`` -- an Expires value that is not an RFC 1123 date (upstream would
  reformat or refuse it).

A client key starting with ``squall-`` is stored as ``squall-u-<key>``. Values that are not
plain printable ASCII (or start with ``=?``, or are empty) are stored RFC 2047 encoded
(``=?UTF-8?B?...?=``), the form AWS itself uses; the encoding is reversible.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from backends.core.base import CHECKSUM_ALGORITHMS, DEFAULT_CONTENT_TYPE, ObjectInfo, ObjectMeta

_RESERVED = "squall-"
_ESCAPED = "squall-u-"
CHECKSUM_KEY = "squall-checksum"
ETAG_KEY = "squall-etag"
EXPIRES_KEY = "squall-expires"
_ENCODED = re.compile(r"^=\?UTF-8\?B\?([A-Za-z0-9+/=]*)\?=$", re.IGNORECASE)
_PLAIN = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$")


def encode_value(value: str) -> str:
    if _PLAIN.match(value) and not value.startswith("=?"):
        return value
    return f"=?UTF-8?B?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def decode_value(value: str) -> str:
    match = _ENCODED.match(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return value


def _http_date(value: str) -> bool:
    """True if upstream will store ``value`` as an Expires date and return it unchanged."""
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return False
    return parsed.tzinfo is not None and email.utils.format_datetime(
        parsed, usegmt=True) == value


def write_params(meta: ObjectMeta, *, etag: str | None = None,
                 with_tags: bool = True) -> dict[str, Any]:
    """PutObject / CreateMultipartUpload / CopyObject(REPLACE) parameters for ``meta``."""
    metadata = {(_ESCAPED + k if k.startswith(_RESERVED) else k): encode_value(v)
                for k, v in meta.user.items()}
    params: dict[str, Any] = {"ContentType": meta.content_type or DEFAULT_CONTENT_TYPE}
    for name, value in (("ContentEncoding", meta.content_encoding),
                        ("ContentDisposition", meta.content_disposition),
                        ("ContentLanguage", meta.content_language),
                        ("CacheControl", meta.cache_control)):
        if value is not None:
            params[name] = value
    if meta.expires is not None:
        if _http_date(meta.expires):
            params["Expires"] = email.utils.parsedate_to_datetime(meta.expires)
        else:
            metadata[EXPIRES_KEY] = encode_value(meta.expires)
    if meta.checksum is not None:
        metadata[CHECKSUM_KEY] = f"{meta.checksum[0]}:{meta.checksum[1]}"
    if etag is not None:
        metadata[ETAG_KEY] = etag
    params["Metadata"] = metadata
    if with_tags and meta.tags:
        params["Tagging"] = tagging_header(meta.tags)
    return params


def tagging_header(tags: Mapping[str, str]) -> str:
    return urllib.parse.urlencode(list(tags.items()), quote_via=urllib.parse.quote)


@dataclass(frozen=True, slots=True)
class Described:
    """An upstream HEAD/GET response, decoded: Squall's info and the upstream ETag."""

    info: ObjectInfo
    upstream_etag: str
    tag_count: int
    stored_etag: str | None  # the squall-etag entry, if any


def _checksum(value: str | None) -> tuple[str, str] | None:
    if not value:
        return None
    algorithm, sep, encoded = value.partition(":")
    if not sep or algorithm not in CHECKSUM_ALGORITHMS:
        return None
    return algorithm, encoded


def describe(response: Mapping[str, Any], bucket: str, key: str, *,
             size: int | None = None, tags: Mapping[str, str] | None = None) -> Described:
    """Decode a HeadObject/GetObject response; ``size`` overrides ContentLength (ranges)."""
    user: dict[str, str] = {}
    reserved: dict[str, str] = {}
    for raw_name, value in (response.get("Metadata") or {}).items():
        name = raw_name.lower()
        if name.startswith(_ESCAPED):
            user[name[len(_ESCAPED):]] = decode_value(value)
        elif name.startswith(_RESERVED):
            reserved[name] = value
        else:
            user[name] = decode_value(value)
    expires = response.get("ExpiresString")
    if expires is None and isinstance(response.get("Expires"), datetime):
        expires = email.utils.format_datetime(response["Expires"], usegmt=True)
    if EXPIRES_KEY in reserved:
        expires = decode_value(reserved[EXPIRES_KEY])
    meta = ObjectMeta(
        content_type=response.get("ContentType") or DEFAULT_CONTENT_TYPE,
        content_encoding=response.get("ContentEncoding") or None,
        content_disposition=response.get("ContentDisposition") or None,
        content_language=response.get("ContentLanguage") or None,
        cache_control=response.get("CacheControl") or None,
        expires=expires or None,
        user=user, tags=dict(tags or {}),
        checksum=_checksum(reserved.get(CHECKSUM_KEY)))
    upstream_etag = str(response.get("ETag", "")).strip('"')
    stored = reserved.get(ETAG_KEY) or None
    modified = response.get("LastModified")
    info = ObjectInfo(bucket=bucket, key=key,
                      size=int(response.get("ContentLength", 0)) if size is None else size,
                      etag=stored or upstream_etag,
                      last_modified=modified.timestamp() if modified else 0.0, meta=meta)
    return Described(info, upstream_etag, int(response.get("TagCount") or 0), stored)


def tags_from(response: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in response.get("TagSet", [])}
