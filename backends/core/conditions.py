"""Write preconditions (If-Match / If-None-Match) as every backend checks them at commit."""

from __future__ import annotations

from backends.core.base import ObjectInfo
from backends.core.errors import NoSuchKey, PreconditionFailed


def etag_matches(header: str, etag: str) -> bool:
    """Whether an ``If-Match`` / ``If-None-Match`` value (``*``, one ETag or a list of
    them, quoted or not, weak or strong) names ``etag`` (RFC 9110, section 13.1)."""
    candidates = (c.strip() for c in header.split(","))
    return any(c == "*" or c.removeprefix("W/").strip('"') == etag for c in candidates)


def check_write_conditions(bucket: str, key: str, current: ObjectInfo | None,
                           if_match: str | None, if_none_match: str | None) -> None:
    """PreconditionFailed (or NoSuchKey for If-Match on a missing key) unless they hold."""
    check_write_etag(bucket, key, current.etag if current else None, if_match, if_none_match)


def check_write_etag(bucket: str, key: str, etag: str | None,
                     if_match: str | None, if_none_match: str | None) -> None:
    """The same rules against the current ETag alone (``None``: no object).

    Either header holds ``*``, an ETag or a list of ETags: If-Match fails unless one of
    them is the current ETag, If-None-Match fails when one of them is (``*``: when there
    is an object)."""
    if if_match is not None:
        if etag is None:
            raise NoSuchKey(bucket, key)
        if not etag_matches(if_match, etag):
            raise PreconditionFailed(f"If-Match {if_match!r} does not match the current ETag.")
    if if_none_match is not None and etag is not None and etag_matches(if_none_match, etag):
        raise PreconditionFailed(f"If-None-Match {if_none_match!r} matches the current "
                                 "object.")
