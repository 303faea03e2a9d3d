"""Write preconditions (If-Match / If-None-Match) as every backend checks them at commit."""

from __future__ import annotations

from backends.core.base import ObjectInfo
from backends.core.errors import NoSuchKey, PreconditionFailed


def check_write_conditions(bucket: str, key: str, current: ObjectInfo | None,
                           if_match: str | None, if_none_match: str | None) -> None:
    """PreconditionFailed (or NoSuchKey for If-Match on a missing key) unless they hold."""
    check_write_etag(bucket, key, current.etag if current else None, if_match, if_none_match)


def check_write_etag(bucket: str, key: str, etag: str | None,
                     if_match: str | None, if_none_match: str | None) -> None:
    """The same rules against the current ETag alone (``None``: no object)."""
    if if_match is not None:
        if etag is None:
            raise NoSuchKey(bucket, key)
        wanted = if_match.strip().strip('"')
        if wanted != "*" and wanted != etag:
            raise PreconditionFailed(f"If-Match {if_match!r} does not match the current ETag.")
    if if_none_match is not None and etag is not None:
        unwanted = if_none_match.strip().strip('"')
        if unwanted in ("*", etag):
            raise PreconditionFailed(f"If-None-Match {if_none_match!r}: the object exists.")
