"""HTTP conditional requests as S3 evaluates them (RFC 7232 with S3's precedence rules)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from backends.core.base import ObjectInfo
from backends.core.conditions import etag_matches as _etag_matches
from backends.core.errors import PreconditionFailed
from gateway.protocol.errors import NotModified


@dataclass(frozen=True, slots=True)
class Conditions:
    """If-* request headers; dates as seconds since the epoch."""

    if_match: str | None = None
    if_none_match: str | None = None
    if_modified_since: float | None = None
    if_unmodified_since: float | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.if_match, self.if_none_match,
                                            self.if_modified_since, self.if_unmodified_since))

    def check_read(self, info: ObjectInfo) -> None:
        """GET/HEAD: PreconditionFailed (412) or NotModified (304, carrying ``info``), S3
        precedence."""
        self._check(info, not_modified=lambda: NotModified(info))

    def check_copy_source(self, info: ObjectInfo) -> None:
        """x-amz-copy-source-if-*: every failure is 412."""
        self._check(info, not_modified=PreconditionFailed)

    def _check(self, info: ObjectInfo, *, not_modified: Callable[[], Exception]) -> None:
        modified = int(info.last_modified)
        match_ok = self.if_match is None or _etag_matches(self.if_match, info.etag)
        if not match_ok:
            raise PreconditionFailed(resource=f"{info.bucket}/{info.key}")
        # If-Match true overrides a false If-Unmodified-Since.
        if (self.if_match is None and self.if_unmodified_since is not None
                and modified > self.if_unmodified_since):
            raise PreconditionFailed(resource=f"{info.bucket}/{info.key}")
        if self.if_none_match is not None:
            if _etag_matches(self.if_none_match, info.etag):
                raise not_modified()
            return  # If-None-Match false overrides If-Modified-Since.
        if self.if_modified_since is not None and modified <= self.if_modified_since:
            raise not_modified()
