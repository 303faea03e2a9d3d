"""Bucket lifecycle rules: the model kept in the bucket's configuration and what each rule
decides for an object, a version or a multipart upload at a given time.

Day-based actions follow S3: the due time is the start time (creation, the moment a
version became noncurrent, the initiation of an upload) plus N days, rounded up to the
next day boundary (midnight UTC with the default day of 86,400 s; a shorter day, a
testing aid, rounds up to the next multiple of its length since the epoch).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DAY = 86_400.0
MAX_RULES = 1000
MAX_NEWER_NONCURRENT = 100


def due(start: float, days: int, day: float = DAY) -> float:
    """When an action of ``days`` days counted from ``start`` is due (next day boundary)."""
    return math.ceil((start + days * day) / day) * day


@dataclass(frozen=True, slots=True)
class Filter:
    """Which objects a rule applies to; every predicate given must hold.

    ``form`` remembers how the client wrote it (``legacy``: a top-level ``Prefix``;
    ``empty``: ``<Filter/>``; ``prefix``, ``tag``, ``gt``, ``lt`` or ``and``), so that
    GetBucketLifecycleConfiguration returns the same document.
    """

    form: str = "empty"
    prefix: str = ""
    tags: tuple[tuple[str, str], ...] = ()
    size_greater_than: int | None = None
    size_less_than: int | None = None

    def matches_key(self, key: str) -> bool:
        return key.startswith(self.prefix)

    def matches(self, key: str, size: int, tags: Mapping[str, str] | None = None) -> bool:
        if not key.startswith(self.prefix):
            return False
        if self.size_greater_than is not None and not size > self.size_greater_than:
            return False
        if self.size_less_than is not None and not size < self.size_less_than:
            return False
        return all((tags or {}).get(k) == v for k, v in self.tags)


@dataclass(frozen=True, slots=True)
class Rule:
    """One lifecycle rule (only the actions Squall can carry out: no transitions)."""

    id: str
    enabled: bool
    filter: Filter = field(default_factory=Filter)
    expiration_days: int | None = None
    expiration_date: str | None = None  # ISO 8601, midnight UTC, as the client wrote it
    expiration_date_epoch: float | None = None
    expired_object_delete_marker: bool | None = None
    noncurrent_days: int | None = None
    newer_noncurrent_versions: int | None = None
    abort_days: int | None = None

    # -- decisions ---------------------------------------------------------------------

    def current_due(self, created: float, day: float = DAY) -> float | None:
        """When a current object created at ``created`` expires under this rule."""
        if self.expiration_days is not None:
            return due(created, self.expiration_days, day)
        return self.expiration_date_epoch

    def expires_current(self, created: float, now: float, day: float = DAY) -> bool:
        when = self.current_due(created, day)
        return when is not None and now >= when

    def expires_lone_marker(self, created: float, now: float, day: float = DAY) -> bool:
        """Whether a delete marker that is a key's only version is removed: with
        ExpiredObjectDeleteMarker at once, with Days once it is old enough (as S3)."""
        if self.expired_object_delete_marker:
            return True
        return self.expiration_days is not None and \
            now >= due(created, self.expiration_days, day)

    def expires_noncurrent(self, noncurrent_since: float, newer_noncurrent: int, now: float,
                           day: float = DAY) -> bool:
        """Whether a version noncurrent since ``noncurrent_since``, with
        ``newer_noncurrent`` noncurrent versions newer than it, is deleted."""
        if self.noncurrent_days is None:
            return False
        if newer_noncurrent < (self.newer_noncurrent_versions or 0):
            return False
        return now >= due(noncurrent_since, self.noncurrent_days, day)

    def aborts_upload(self, initiated: float, now: float, day: float = DAY) -> bool:
        return self.abort_days is not None and now >= due(initiated, self.abort_days, day)

    @property
    def needs_tags(self) -> bool:
        return bool(self.filter.tags)

    # -- stored form -------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        f = self.filter
        return {"id": self.id, "enabled": self.enabled,
                "filter": {"form": f.form, "prefix": f.prefix,
                           "tags": [list(t) for t in f.tags], "gt": f.size_greater_than,
                           "lt": f.size_less_than},
                "expiration_days": self.expiration_days,
                "expiration_date": self.expiration_date,
                "expiration_date_epoch": self.expiration_date_epoch,
                "expired_object_delete_marker": self.expired_object_delete_marker,
                "noncurrent_days": self.noncurrent_days,
                "newer_noncurrent_versions": self.newer_noncurrent_versions,
                "abort_days": self.abort_days}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Rule:
        f = doc.get("filter") or {}
        return cls(
            id=str(doc["id"]), enabled=bool(doc["enabled"]),
            filter=Filter(form=str(f.get("form", "empty")), prefix=str(f.get("prefix", "")),
                          tags=tuple((str(k), str(v)) for k, v in f.get("tags", ())),
                          size_greater_than=f.get("gt"), size_less_than=f.get("lt")),
            expiration_days=doc.get("expiration_days"),
            expiration_date=doc.get("expiration_date"),
            expiration_date_epoch=doc.get("expiration_date_epoch"),
            expired_object_delete_marker=doc.get("expired_object_delete_marker"),
            noncurrent_days=doc.get("noncurrent_days"),
            newer_noncurrent_versions=doc.get("newer_noncurrent_versions"),
            abort_days=doc.get("abort_days"))


def rules_to_json(rules: Sequence[Rule]) -> list[dict[str, Any]]:
    return [rule.to_json() for rule in rules]


def rules_from_json(doc: Sequence[Mapping[str, Any]]) -> list[Rule]:
    return [Rule.from_json(item) for item in doc]
