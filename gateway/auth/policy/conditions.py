"""Policy conditions: the operators and keys Squall evaluates, with IAM's semantics.

Within one condition block, operators and keys are ANDed; the values of one key are ORed
(NORed under a negated operator). A key the request does not have fails a positive
operator and satisfies a negated one; ``...IfExists`` satisfies any operator then, and
``ForAnyValue:`` / ``ForAllValues:`` test the request's values as a set (Squall's keys
hold one value or none).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from gateway.auth.policy.variables import Template, has_variables, parse_template, substitute
from gateway.auth.policy.wildcard import compile_wildcard, has_wildcard
from gateway.protocol.errors import MalformedPolicy

IpValue = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class KeyType(Enum):
    STRING = "string"
    IP = "ip"
    BOOL = "bool"


#: lowercase key -> (its spelling in docs and messages, its type)
KEYS: dict[str, tuple[str, KeyType]] = {
    "aws:sourceip": ("aws:SourceIp", KeyType.IP),
    "aws:securetransport": ("aws:SecureTransport", KeyType.BOOL),
    "aws:username": ("aws:username", KeyType.STRING),
    "aws:userid": ("aws:userid", KeyType.STRING),
    "s3:prefix": ("s3:prefix", KeyType.STRING),
}

# operator -> (the type of key it compares, negated)
_OPERATORS: dict[str, tuple[KeyType | None, bool]] = {
    "StringEquals": (KeyType.STRING, False),
    "StringNotEquals": (KeyType.STRING, True),
    "StringEqualsIgnoreCase": (KeyType.STRING, False),
    "StringNotEqualsIgnoreCase": (KeyType.STRING, True),
    "StringLike": (KeyType.STRING, False),
    "StringNotLike": (KeyType.STRING, True),
    "IpAddress": (KeyType.IP, False),
    "NotIpAddress": (KeyType.IP, True),
    "Bool": (KeyType.BOOL, False),
    "Null": (None, False),
}
_QUALIFIERS = ("ForAnyValue", "ForAllValues")
_BOOLS = ("true", "false")
# Narrowest ranges that still count as "public" (S3's rule for GetBucketPolicyStatus).
_PUBLIC_PREFIX = {4: 8, 6: 32}


def _syntax() -> MalformedPolicy:
    return MalformedPolicy("Invalid policy syntax.")


@dataclass(frozen=True, slots=True)
class Condition:
    """One operator applied to one key and its values."""

    operator: str  # as written, e.g. "ForAnyValue:StringLikeIfExists"
    base: str  # e.g. "StringLike"
    qualifier: str | None
    if_exists: bool
    negated: bool
    key: str  # lowercase
    values: tuple[str, ...]
    match: Callable[[Any], bool]  # one request value against the values (positive form)
    templates: tuple[Template, ...] | None = None  # the values, when they hold variables

    def holds(self, context: Mapping[str, Any]) -> bool:
        value = context.get(self.key)
        if self.base == "Null":
            return (value is None) == (self.values[0].lower() == "true")
        match = self.match if self.templates is None else self._substituted(context)
        if self.qualifier is not None:
            present = () if value is None else (value,)
            hits = (match(v) != self.negated for v in present)
            return all(hits) if self.qualifier == "ForAllValues" else any(hits)
        if value is None:
            return self.if_exists or self.negated
        return match(value) != self.negated

    def _substituted(self, context: Mapping[str, Any]) -> Callable[[Any], bool]:
        """The matcher of the values with the request's variables in place."""
        like = self.base.endswith("Like")
        values = [v for v in (substitute(t, context, wildcards=like)
                              for t in self.templates or ()) if v is not None]
        if like:
            pattern = re.compile("|".join(f"(?:{v})" for v in values) or "(?!)", re.DOTALL)
            return lambda v: pattern.fullmatch(v) is not None
        return _string_matcher(self.base, tuple(values))

    def confines(self) -> bool:
        """Whether the condition holds requests to fixed sources or principals (so that
        a statement for everyone under it is not public, as S3 judges)."""
        if (self.negated or self.if_exists or self.qualifier is not None
                or self.templates is not None):
            return False
        if self.base == "IpAddress":
            nets = [ipaddress.ip_network(v, strict=False) for v in self.values]
            return all(n.prefixlen >= _PUBLIC_PREFIX[n.version] for n in nets)
        if self.key in ("aws:username", "aws:userid"):
            return self.base in ("StringEquals", "StringEqualsIgnoreCase") or (
                self.base == "StringLike" and not any(has_wildcard(v) for v in self.values))
        return False


def parse_conditions(block: Any, *, variables: bool) -> tuple[Condition, ...]:
    """The ``Condition`` element of a statement (``variables``: the policy's version
    has policy variables)."""
    if not isinstance(block, dict):
        raise _syntax()
    out = []
    for operator, keys in block.items():
        base, qualifier, if_exists = _operator(operator)
        if not isinstance(keys, dict) or not keys:
            raise _syntax()
        for key, raw in keys.items():
            out.append(_condition(operator, base, qualifier, if_exists, key, raw,
                                  variables))
    return tuple(out)


def _operator(operator: str) -> tuple[str, str | None, bool]:
    qualifier, _, name = operator.rpartition(":")
    if qualifier and qualifier not in _QUALIFIERS:
        raise MalformedPolicy(f"Invalid Condition type : {operator}")
    if_exists = name.endswith("IfExists") and name not in _OPERATORS
    base = name.removesuffix("IfExists") if if_exists else name
    if base not in _OPERATORS or (base == "Null" and (if_exists or qualifier)):
        raise MalformedPolicy(f"Invalid Condition type : {operator}")
    return base, qualifier or None, if_exists


def _values(raw: Any) -> tuple[str, ...]:
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for item in items:
        if isinstance(item, bool):
            out.append("true" if item else "false")
        elif isinstance(item, str | int | float):
            out.append(str(item))
        else:
            raise _syntax()
    if not out:
        raise _syntax()
    return tuple(out)


def _condition(operator: str, base: str, qualifier: str | None, if_exists: bool,
               key: str, raw: Any, variables: bool) -> Condition:
    known = KEYS.get(key.lower())
    if known is None:
        raise MalformedPolicy(f"Policy has an invalid condition key: {key} (Squall "
                              f"evaluates {', '.join(name for name, _ in KEYS.values())})")
    name, key_type = known
    wanted, negated = _OPERATORS[base]
    if wanted is not None and wanted is not key_type:
        raise MalformedPolicy(f"Invalid Condition type : {operator} cannot be used with "
                              f"the condition key {name}")
    values = _values(raw)
    match: Callable[[Any], bool]
    if base == "Null" or base == "Bool":
        if any(v.lower() not in _BOOLS for v in values):
            raise MalformedPolicy(f"The condition {operator} on {name} takes true or false, "
                                  f"not {values[0]!r}")
        if base == "Null" and len(values) != 1:
            raise MalformedPolicy(f"The condition {operator} on {name} takes one value")
        wanted_bools = frozenset(v.lower() for v in values)
        match = wanted_bools.__contains__
    elif base in ("IpAddress", "NotIpAddress"):
        match = _ip_match(operator, values)
    else:
        match = _string_matcher(base, values)
    templates = None
    if variables and key_type is KeyType.STRING and any(has_variables(v) for v in values):
        templates = tuple(parse_template(v) for v in values)
    return Condition(operator, base, qualifier, if_exists, negated, key.lower(), values,
                     match, templates)


def _string_matcher(base: str, values: tuple[str, ...]) -> Callable[[Any], bool]:
    if base.endswith("IgnoreCase"):
        lowered = frozenset(v.lower() for v in values)
        return lambda v: v.lower() in lowered
    if base.endswith("Like"):
        joined = "|".join(f"(?:{compile_wildcard(v).pattern})" for v in values)
        like = re.compile(joined or "(?!)", re.DOTALL)
        return lambda v: like.fullmatch(v) is not None
    return frozenset(values).__contains__


def _ip_match(operator: str, values: tuple[str, ...]) -> Callable[[Any], bool]:
    try:
        nets = tuple(ipaddress.ip_network(v, strict=False) for v in values)
    except ValueError as exc:
        raise MalformedPolicy(f"The condition {operator} needs IP addresses or CIDR "
                              f"ranges: {exc}") from exc

    def match(address: IpValue) -> bool:
        return any(address in net for net in nets)

    return match


def source_address(text: str) -> IpValue | None:
    """The client's address as ``aws:SourceIp`` compares it (an IPv4-mapped IPv6
    address as IPv4); None when it is not an IP address (a Unix socket)."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
