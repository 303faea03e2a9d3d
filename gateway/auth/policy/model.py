"""A parsed bucket policy and its evaluation against one request."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from gateway.auth.policy.conditions import Condition, source_address
from gateway.auth.policy.variables import Template, substitute
from gateway.auth.users import User


class Decision(Enum):
    """What a policy says of a request: an explicit deny, an allow, or nothing (the
    caller's default, which denies unless an ACL or ownership allows)."""

    DENY = "deny"
    ALLOW = "allow"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """The facts a policy is evaluated against."""

    user: User | None  # None: anonymous
    action: str  # "s3:GetObject"
    bucket: str
    key: str | None  # None for bucket-level actions
    source_ip: str
    secure_transport: bool
    prefix: str | None = None  # ListObjects' prefix (s3:prefix)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a ``Principal`` names: everyone (anonymous included), or Squall users by
    name or canonical id."""

    everyone: bool = False
    names: frozenset[str] = frozenset()
    canonical_ids: frozenset[str] = frozenset()

    def matches(self, user: User | None) -> bool:
        if self.everyone:
            return True
        return user is not None and (user.name in self.names
                                     or user.canonical_id in self.canonical_ids)


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement; ``not_*`` mean the element was written ``NotPrincipal`` and so on.
    ``actions`` and ``resources`` are single compiled alternations of the wildcards."""

    sid: str | None
    deny: bool
    principal: Principal
    not_principal: bool
    actions: re.Pattern[str]
    not_action: bool
    resources: re.Pattern[str]
    not_resource: bool
    conditions: tuple[Condition, ...]
    resource_templates: tuple[Template, ...] = ()  # resources with policy variables

    def applies(self, request: PolicyRequest, resource: str,
                context: dict[str, Any] | None) -> bool:
        if self.principal.matches(request.user) == self.not_principal:
            return False
        if (self.actions.fullmatch(request.action) is None) != self.not_action:
            return False
        if self._names(resource, context) == self.not_resource:
            return False
        return context is None or all(c.holds(context) for c in self.conditions)

    def _names(self, resource: str, context: dict[str, Any] | None) -> bool:
        if self.resources.fullmatch(resource) is not None:
            return True
        for template in self.resource_templates:
            pattern = substitute(template, context or {}, wildcards=True)
            if pattern is not None and re.fullmatch(pattern, resource, re.DOTALL):
                return True
        return False

    @property
    def is_public(self) -> bool:
        """An Allow for everyone (``*`` or a NotPrincipal) that no condition holds to a
        fixed source or principal."""
        if self.deny:
            return False
        if not (self.not_principal or self.principal.everyone):
            return False
        return not any(c.confines() for c in self.conditions)


def request_context(request: PolicyRequest) -> dict[str, Any]:
    """The condition keys of ``request`` (lowercase names; a missing key is absent)."""
    context: dict[str, Any] = {
        "aws:securetransport": "true" if request.secure_transport else "false",
        "aws:userid": "anonymous" if request.user is None else request.user.canonical_id,
    }
    address = source_address(request.source_ip)
    if address is not None:
        context["aws:sourceip"] = address
    if request.user is not None:
        context["aws:username"] = request.user.name
    if request.prefix is not None:
        context["s3:prefix"] = request.prefix
    return context


class BucketPolicy:
    """A parsed bucket policy: ``text`` is the document as it was sent."""

    __slots__ = ("_conditional", "id", "statements", "text", "version")

    def __init__(self, text: str, statements: Sequence[Statement], *,
                 version: str | None = None, policy_id: str | None = None) -> None:
        self.text = text
        self.statements = tuple(statements)
        self.version = version
        self.id = policy_id
        self._conditional = any(s.conditions or s.resource_templates
                                for s in self.statements)

    def evaluate(self, request: PolicyRequest) -> Decision:
        """DENY if a Deny statement applies, else ALLOW if an Allow statement applies,
        else NONE."""
        resource = f"arn:aws:s3:::{request.bucket}"
        if request.key is not None:
            resource = f"{resource}/{request.key}"
        context = request_context(request) if self._conditional else None
        allowed = False
        for statement in self.statements:
            if statement.applies(request, resource, context):
                if statement.deny:
                    return Decision.DENY
                allowed = True
        return Decision.ALLOW if allowed else Decision.NONE

    @property
    def is_public(self) -> bool:
        """Whether S3 would call the policy public (GetBucketPolicyStatus,
        BlockPublicPolicy)."""
        return any(s.is_public for s in self.statements)
