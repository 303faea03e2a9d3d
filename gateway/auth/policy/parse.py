"""Reading a bucket policy document: the JSON grammar of IAM policies, the subset Squall
evaluates, and S3's checks (its own bucket only, known S3 actions, 20 KB)."""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.auth.policy.actions import ACTIONS, Kind
from gateway.auth.policy.conditions import parse_conditions
from gateway.auth.policy.model import BucketPolicy, Principal, Statement
from gateway.auth.policy.variables import has_variables, parse_template
from gateway.auth.policy.wildcard import compile_wildcard, has_wildcard
from gateway.protocol.errors import MalformedPolicy

MAX_POLICY_SIZE = 20 * 1024  # S3's limit, on the document without whitespace
VERSIONS = ("2012-10-17", "2008-10-17")
_TOP = ("Version", "Id", "Statement")
_ELEMENTS = ("Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction",
             "Resource", "NotResource", "Condition")
_S3_ARN = "arn:aws:s3:::"
_ACTION = re.compile(r"s3:[A-Za-z0-9*?]+", re.IGNORECASE)
_USER = re.compile(r"[A-Za-z0-9+=,.@_-]{1,64}")  # IAM user names, as gateway.auth.users
_USER_ARN = re.compile(r"arn:aws:iam::[^:]*:user/(?:[^:]*/)?([A-Za-z0-9+=,.@_-]{1,64})")
_CANONICAL = re.compile(r"[0-9a-fA-F]{64}")


def _syntax() -> MalformedPolicy:
    return MalformedPolicy("Invalid policy syntax.")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise MalformedPolicy(f"Statement/policy already has instance of {name}")
        out[name] = value
    return out


def _document(text: bytes) -> tuple[str, dict[str, Any]]:
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedPolicy("This policy contains invalid Json") from exc
    if not decoded.lstrip(" \t\r\n").startswith("{"):
        raise MalformedPolicy("Policies must be valid JSON and the first byte must be '{'")
    try:
        doc = json.loads(decoded, object_pairs_hook=_no_duplicates)
    except ValueError as exc:  # JSONDecodeError, and a duplicate name
        if isinstance(exc, MalformedPolicy):
            raise
        raise MalformedPolicy("This policy contains invalid Json") from exc
    if not isinstance(doc, dict):
        raise MalformedPolicy("Policies must be valid JSON and the first byte must be '{'")
    compact = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    if len(compact) > MAX_POLICY_SIZE:
        raise MalformedPolicy("Policy exceeds the maximum allowed document size.")
    return decoded, doc


def parse_policy(text: bytes, bucket: str) -> BucketPolicy:
    """The policy ``text`` of ``bucket``; MalformedPolicy (with S3's message where S3
    has one) if it is not a policy Squall can enforce as written."""
    decoded, doc = _document(text)
    for name in doc:
        if name not in _TOP:
            raise MalformedPolicy(f"Unknown field {name}")
    version = doc.get("Version")
    if version is not None and version not in VERSIONS:
        raise MalformedPolicy("The policy must contain a valid version string")
    policy_id = doc.get("Id")
    if policy_id is not None and not isinstance(policy_id, str):
        raise _syntax()
    if "Statement" not in doc:
        raise MalformedPolicy("Missing required field Statement")
    raw = doc["Statement"]
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise MalformedPolicy("Could not parse the policy: Statement is empty!")
    variables = version == "2012-10-17"  # the version that has policy variables
    statements = [_statement(item, bucket, variables) for item in items]
    sids = [s.sid for s in statements if s.sid]
    if len(sids) != len(set(sids)):
        raise MalformedPolicy("Statement IDs (SID) in a single policy must be unique")
    return BucketPolicy(decoded, statements, version=version, policy_id=policy_id)


def _one_of(item: dict[str, Any], name: str) -> tuple[Any, bool]:
    """The element ``name`` or ``Not<name>`` (exactly one), and whether it was the Not."""
    plain, negated = item.get(name), item.get("Not" + name)
    if plain is not None and negated is not None:
        raise MalformedPolicy(f"Statement/policy already has instance of {name}")
    if plain is None and negated is None:
        raise MalformedPolicy(f"Missing required field {name}")
    return (plain, False) if plain is not None else (negated, True)


def _strings(value: Any, name: str) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in items):
        raise _syntax()
    if not items:
        raise MalformedPolicy(f"Missing required field {name} cannot be empty!")
    return items


def _statement(item: Any, bucket: str, variables: bool) -> Statement:
    if not isinstance(item, dict):
        raise _syntax()
    for name in item:
        if name not in _ELEMENTS:
            raise MalformedPolicy(f"Unknown field {name}")
    sid = item.get("Sid")
    if sid is not None and not isinstance(sid, str):
        raise _syntax()
    effect = item.get("Effect")
    if effect is None:
        raise MalformedPolicy("Missing required field Effect")
    if effect not in ("Allow", "Deny"):
        raise MalformedPolicy(f"Invalid effect: {effect}")
    principal, not_principal = _one_of(item, "Principal")
    actions, not_action = _one_of(item, "Action")
    resources, not_resource = _one_of(item, "Resource")
    action_list = _strings(actions, "Action")
    resource_list = _strings(resources, "Resource")
    kinds = set()
    for action in action_list:
        kinds.add(frozenset(_action_kinds(action)))
    resource_kinds = set()
    for resource in resource_list:
        resource_kinds |= _resource_kinds(resource, bucket, variables)
    if not not_action and not not_resource and any(not (k & resource_kinds) for k in kinds):
        raise MalformedPolicy("Action does not apply to any resource(s) in statement")
    conditions = (parse_conditions(item["Condition"], variables=variables)
                  if "Condition" in item else ())
    templated = [r for r in resource_list if variables and has_variables(r)]
    return Statement(
        sid=sid, deny=effect == "Deny",
        principal=_principal(principal), not_principal=not_principal,
        actions=_alternation(action_list, ignore_case=True), not_action=not_action,
        resources=_alternation([r for r in resource_list if r not in templated],
                               ignore_case=False),
        not_resource=not_resource, conditions=conditions,
        resource_templates=tuple(parse_template(r) for r in templated))


def _alternation(patterns: list[str], *, ignore_case: bool) -> re.Pattern[str]:
    joined = "|".join(f"(?:{compile_wildcard(p).pattern})" for p in patterns) or "(?!)"
    return re.compile(joined, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def _action_kinds(action: str) -> set[Kind]:
    if action == "*":
        return set(Kind)
    if not _ACTION.fullmatch(action):
        raise MalformedPolicy("Policy has invalid action")
    if not has_wildcard(action):
        kind = ACTIONS.get(action.lower())
        if kind is None:
            raise MalformedPolicy("Policy has invalid action")
        return {kind}
    pattern = compile_wildcard(action, ignore_case=True)
    kinds = {kind for name, kind in ACTIONS.items() if pattern.fullmatch(name)}
    if not kinds:
        raise MalformedPolicy("Policy has invalid action")
    return kinds


def _resource_kinds(resource: str, bucket: str, variables: bool) -> set[Kind]:
    """The kinds of resource ``resource`` can name; MalformedPolicy unless it can name
    this bucket or its objects (variables only in the key part)."""
    if not resource.startswith(_S3_ARN):
        raise MalformedPolicy("Policy has invalid resource")
    path = resource[len(_S3_ARN):]
    bucket_part, slash, rest = path.partition("/")
    if variables and has_variables(resource):
        if has_variables(bucket_part):
            raise MalformedPolicy("Policy has invalid resource")
        parse_template(rest)  # a variable Squall does not know is refused
        path = f"{bucket_part}/x"
    if compile_wildcard(bucket_part).fullmatch(bucket) is None:
        raise MalformedPolicy("Policy has invalid resource")
    kinds = set()
    if compile_wildcard(path).fullmatch(bucket):
        kinds.add(Kind.BUCKET)
    if slash or "*" in bucket_part:
        kinds.add(Kind.OBJECT)
    return kinds


def _principal(value: Any) -> Principal:
    if value == "*":
        return Principal(everyone=True)
    if not isinstance(value, dict) or not value:
        raise MalformedPolicy("Invalid principal in policy")
    names: set[str] = set()
    ids: set[str] = set()
    for kind, raw in value.items():
        items = raw if isinstance(raw, list) else [raw]
        if not items or not all(isinstance(v, str) for v in items):
            raise MalformedPolicy("Invalid principal in policy")
        for item in items:
            if kind == "AWS" and item == "*":
                return Principal(everyone=True)
            if kind == "AWS":
                names.add(_user_name(item))
            elif kind == "CanonicalUser" and _CANONICAL.fullmatch(item):
                ids.add(item.lower())
            else:
                raise MalformedPolicy("Invalid principal in policy")
    return Principal(names=frozenset(names), canonical_ids=frozenset(ids))


def _user_name(item: str) -> str:
    """The Squall user an ``AWS`` principal names: ``arn:aws:iam::<any>:user/NAME`` or
    the bare name."""
    match = _USER_ARN.fullmatch(item)
    if match is not None:
        return match.group(1)
    if not item.startswith("arn:") and _USER.fullmatch(item):
        return item
    raise MalformedPolicy("Invalid principal in policy")
