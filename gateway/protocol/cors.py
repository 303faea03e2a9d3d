"""A bucket's CORS rules and how S3 matches a (pre)flight request against them.

Protocol-neutral: the S3 layer parses the XML into :class:`CorsRule` values and turns a
matched rule into ``Access-Control-*`` headers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

METHODS = ("GET", "PUT", "HEAD", "POST", "DELETE")
MAX_RULES = 100


@dataclass(frozen=True, slots=True)
class CorsRule:
    allowed_origins: tuple[str, ...]
    allowed_methods: tuple[str, ...]
    allowed_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age_seconds: int | None = None
    id: str | None = None

    def allows(self, origin: str, method: str, headers: Sequence[str] = ()) -> bool:
        """Whether this rule allows ``method`` from ``origin`` with request ``headers``
        (lowercase names)."""
        return (method in self.allowed_methods
                and any(_wildcard(pattern, origin) for pattern in self.allowed_origins)
                and all(any(_wildcard(p.lower(), h) for p in self.allowed_headers)
                        for h in headers))

    @property
    def any_origin(self) -> bool:
        return "*" in self.allowed_origins


def _wildcard(pattern: str, value: str) -> bool:
    """``pattern`` with at most one ``*`` (any run of characters) matches all of ``value``."""
    head, star, tail = pattern.partition("*")
    if not star:
        return pattern == value
    return (len(value) >= len(head) + len(tail) and value.startswith(head)
            and value.endswith(tail))


def first_match(rules: Sequence[CorsRule], origin: str, method: str,
                headers: Sequence[str] = ()) -> CorsRule | None:
    """The first rule allowing the request, as S3 evaluates them (in order)."""
    return next((r for r in rules if r.allows(origin, method, headers)), None)


def rules_to_json(rules: Sequence[CorsRule]) -> list[dict[str, Any]]:
    return [asdict(rule) for rule in rules]


def rules_from_json(doc: Any) -> list[CorsRule]:
    return [CorsRule(allowed_origins=tuple(r["allowed_origins"]),
                     allowed_methods=tuple(r["allowed_methods"]),
                     allowed_headers=tuple(r.get("allowed_headers", ())),
                     expose_headers=tuple(r.get("expose_headers", ())),
                     max_age_seconds=r.get("max_age_seconds"), id=r.get("id"))
            for r in doc or []]
