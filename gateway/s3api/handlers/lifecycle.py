"""Put/Get/DeleteBucketLifecycleConfiguration: the XML document <-> lifecycle rules.

Validation follows S3: structural mistakes are ``MalformedXML``, bad values
``InvalidArgument``, combinations S3 refuses ``InvalidRequest``; transitions (storage
classes Squall does not have) are ``501 NotImplemented``.
"""

from __future__ import annotations

import datetime
import re
import uuid
from xml.etree.ElementTree import Element

from starlette.responses import Response

from backends.core.numbers import integer
from gateway.lifecycle.rules import MAX_NEWER_NONCURRENT, MAX_RULES, Filter, Rule
from gateway.protocol.errors import (
    InvalidArgument,
    InvalidRequest,
    MalformedXML,
    NoSuchLifecycleConfiguration,
    NotImplementedOperation,
)
from gateway.protocol.responses import empty_response, xml_response
from gateway.protocol.xml import el, parse
from gateway.s3api.context import S3Request
from gateway.s3api.handlers.cors import require_integrity_header

MAX_ID = 255
MAX_PREFIX = 1024
_DATE = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})(?:T([0-9]{2}):([0-9]{2}):([0-9]{2})"
                   r"(\.[0-9]+)?"
                   r"(Z|[+-]00:?00)?)?$")
_RULE_CHILDREN = {"ID", "Status", "Filter", "Prefix", "Expiration",
                  "NoncurrentVersionExpiration", "AbortIncompleteMultipartUpload",
                  "Transition", "NoncurrentVersionTransition"}


def _one(node: Element, tag: str) -> Element | None:
    found = node.findall(tag)
    if len(found) > 1:
        raise MalformedXML(f"The element {tag} may appear only once in {node.tag}.")
    return found[0] if found else None


def _text(node: Element | None) -> str:
    return "" if node is None else (node.text or "").strip()


def _integer(node: Element, tag: str) -> int:
    value = integer(_text(node))
    if value is None:
        raise MalformedXML(f"{tag} must be an integer.")
    return value


def _positive(node: Element | None, tag: str, action: str) -> int | None:
    if node is None:
        return None
    value = _integer(node, tag)
    if value <= 0:
        raise InvalidArgument(f"'{tag}' for {action} action must be a positive integer")
    return value


def _date(node: Element) -> tuple[str, float]:
    match = _DATE.match(_text(node))
    if match is None:
        raise InvalidArgument("'Date' must be a date in ISO 8601 format")
    year, month, day, hour, minute, second, fraction, _zone = match.groups()
    try:
        moment = datetime.datetime(int(year), int(month), int(day), int(hour or 0),
                                   int(minute or 0), int(second or 0), tzinfo=datetime.UTC)
    except ValueError as exc:
        raise InvalidArgument("'Date' must be a date in ISO 8601 format") from exc
    if moment.time() != datetime.time() or (fraction and fraction.strip(".0")):
        raise InvalidArgument("'Date' must be at midnight GMT")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z"), moment.timestamp()


def _prefix(node: Element | None) -> str:
    prefix = "" if node is None else node.text or ""
    if len(prefix.encode()) > MAX_PREFIX:
        raise InvalidRequest(f"The maximum size of a prefix is {MAX_PREFIX}.")
    return prefix


def _tag(node: Element) -> tuple[str, str]:
    key, value = _one(node, "Key"), _one(node, "Value")
    if key is None or value is None:
        raise MalformedXML("A Tag needs a Key and a Value.")
    k, v = key.text or "", value.text or ""
    if not 1 <= len(k) <= 128:
        raise InvalidRequest("A Tag's Key must be a length between 1 and 128")
    if len(v) > 256:
        raise InvalidRequest("A Tag's Value must be a length between 0 and 256")
    return k, v


def _size(node: Element | None, tag: str) -> int | None:
    if node is None:
        return None
    value = _integer(node, tag)
    if value < 0:
        raise InvalidArgument(f"'{tag}' must be a non-negative integer")
    return value


def _filter(node: Element) -> Filter:
    kinds = [c.tag for c in node]
    allowed = {"Prefix", "Tag", "And", "ObjectSizeGreaterThan", "ObjectSizeLessThan"}
    if any(k not in allowed for k in kinds) or len(kinds) > 1:
        raise MalformedXML("A Filter must have exactly one of Prefix, Tag, "
                           "ObjectSizeGreaterThan, ObjectSizeLessThan or And.")
    if not kinds:
        return Filter(form="empty")
    child = node[0]
    if child.tag == "Prefix":
        return Filter(form="prefix", prefix=_prefix(child))
    if child.tag == "Tag":
        return Filter(form="tag", tags=(_tag(child),))
    if child.tag == "ObjectSizeGreaterThan":
        return Filter(form="gt", size_greater_than=_size(child, child.tag))
    if child.tag == "ObjectSizeLessThan":
        return Filter(form="lt", size_less_than=_size(child, child.tag))
    return _and(child)


def _and(node: Element) -> Filter:
    allowed = {"Prefix", "Tag", "ObjectSizeGreaterThan", "ObjectSizeLessThan"}
    if any(c.tag not in allowed for c in node):
        raise MalformedXML("And may hold only Prefix, Tag, ObjectSizeGreaterThan and "
                           "ObjectSizeLessThan.")
    prefix_node = _one(node, "Prefix")
    tags = tuple(_tag(t) for t in node.findall("Tag"))
    gt = _size(_one(node, "ObjectSizeGreaterThan"), "ObjectSizeGreaterThan")
    lt = _size(_one(node, "ObjectSizeLessThan"), "ObjectSizeLessThan")
    if len(node) < 2:
        raise MalformedXML("And must combine at least two predicates.")
    if len({k for k, _ in tags}) != len(tags):
        raise InvalidRequest("Duplicate Tag Keys are not allowed.")
    if gt is not None and lt is not None and gt >= lt:
        raise InvalidRequest("ObjectSizeGreaterThan must be less than ObjectSizeLessThan.")
    return Filter(form="and", prefix=_prefix(prefix_node), tags=tags,
                  size_greater_than=gt, size_less_than=lt)


def _expiration(node: Element, rule_filter: Filter) -> tuple[int | None, str | None,
                                                              float | None, bool | None]:
    days_node, date_node = _one(node, "Days"), _one(node, "Date")
    marker_node = _one(node, "ExpiredObjectDeleteMarker")
    given = [n for n in (days_node, date_node, marker_node) if n is not None]
    if not given:
        raise MalformedXML("Expiration needs one of Days, Date or ExpiredObjectDeleteMarker.")
    if len(given) > 1:
        raise MalformedXML("Expiration may have only one of Days, Date or "
                           "ExpiredObjectDeleteMarker.")
    days = _positive(days_node, "Days", "Expiration")
    date, epoch = _date(date_node) if date_node is not None else (None, None)
    marker = None
    if marker_node is not None:
        raw = _text(marker_node).lower()
        if raw not in ("true", "false"):
            raise MalformedXML("ExpiredObjectDeleteMarker must be true or false.")
        if rule_filter.tags:
            raise InvalidRequest("ExpiredObjectDeleteMarker cannot be specified with "
                                 "object tags.")
        marker = raw == "true"
    return days, date, epoch, marker


def parse_rule(node: Element) -> Rule:
    """One ``<Rule>`` element as a :class:`Rule` (S3's errors for bad ones)."""
    for child in node:
        if child.tag not in _RULE_CHILDREN:
            raise MalformedXML(f"Unknown element {child.tag} in Rule.")
    if node.find("Transition") is not None or \
            node.find("NoncurrentVersionTransition") is not None:
        raise NotImplementedOperation("Lifecycle transitions are not implemented: Squall "
                                      "has one storage class.")
    id_node = _one(node, "ID")
    ident = _text(id_node) or uuid.uuid4().hex
    if len(ident) > MAX_ID:
        raise InvalidArgument(f"ID length should not exceed allowed limit of {MAX_ID}")
    status = _text(_one(node, "Status"))
    if status not in ("Enabled", "Disabled"):
        raise MalformedXML("Status must be Enabled or Disabled.")
    filter_node, prefix_node = _one(node, "Filter"), _one(node, "Prefix")
    if filter_node is not None and prefix_node is not None:
        raise MalformedXML("A Rule may have a Filter or a Prefix, not both.")
    if filter_node is None and prefix_node is None:
        raise MalformedXML("A Rule needs a Filter (or the legacy Prefix).")
    rule_filter = _filter(filter_node) if filter_node is not None else \
        Filter(form="legacy", prefix=_prefix(prefix_node))
    expiration = _one(node, "Expiration")
    noncurrent = _one(node, "NoncurrentVersionExpiration")
    abort = _one(node, "AbortIncompleteMultipartUpload")
    if expiration is None and noncurrent is None and abort is None:
        raise InvalidRequest("At least one action needs to be specified in a rule")
    days = date = epoch = marker = None
    if expiration is not None:
        days, date, epoch, marker = _expiration(expiration, rule_filter)
    noncurrent_days = newer = None
    if noncurrent is not None:
        nd = _one(noncurrent, "NoncurrentDays")
        if nd is None:
            raise MalformedXML("NoncurrentVersionExpiration needs NoncurrentDays.")
        noncurrent_days = _positive(nd, "NoncurrentDays", "NoncurrentVersionExpiration")
        newer_node = _one(noncurrent, "NewerNoncurrentVersions")
        if newer_node is not None:
            newer = _integer(newer_node, "NewerNoncurrentVersions")
            if not 1 <= newer <= MAX_NEWER_NONCURRENT:
                raise InvalidArgument("'NewerNoncurrentVersions' for "
                                      "NoncurrentVersionExpiration action must be a "
                                      f"positive integer up to {MAX_NEWER_NONCURRENT}")
    abort_days = None
    if abort is not None:
        if rule_filter.tags:
            raise InvalidRequest("AbortIncompleteMultipartUpload cannot be specified "
                                 "with Tags.")
        dai = _one(abort, "DaysAfterInitiation")
        if dai is None:
            raise MalformedXML("AbortIncompleteMultipartUpload needs DaysAfterInitiation.")
        abort_days = _positive(dai, "DaysAfterInitiation", "AbortIncompleteMultipartUpload")
    return Rule(id=ident, enabled=status == "Enabled", filter=rule_filter,
                expiration_days=days, expiration_date=date, expiration_date_epoch=epoch,
                expired_object_delete_marker=marker, noncurrent_days=noncurrent_days,
                newer_noncurrent_versions=newer, abort_days=abort_days)


def parse_rules(document: bytes) -> list[Rule]:
    """A LifecycleConfiguration document as rules."""
    root = parse(document, "LifecycleConfiguration")
    if any(child.tag != "Rule" for child in root):
        raise MalformedXML("A LifecycleConfiguration holds only Rule elements.")
    nodes = root.findall("Rule")
    if not nodes:
        raise MalformedXML("The lifecycle configuration needs at least one Rule.")
    if len(nodes) > MAX_RULES:
        raise MalformedXML(f"The lifecycle configuration may hold at most {MAX_RULES} rules.")
    rules = [parse_rule(node) for node in nodes]
    ids = [rule.id for rule in rules]
    if len(set(ids)) != len(ids):
        raise InvalidArgument("Rule ID must be unique. Found same ID for more than one rule")
    return rules


def _tag_xml(key: str, value: str) -> str:
    return f"<Tag>{el('Key', key)}{el('Value', value)}</Tag>"


def _filter_xml(f: Filter) -> str:
    if f.form == "legacy":
        return el("Prefix", f.prefix)
    if f.form == "prefix":
        inner = el("Prefix", f.prefix)
    elif f.form == "tag":
        inner = _tag_xml(*f.tags[0])
    elif f.form == "gt":
        inner = el("ObjectSizeGreaterThan", f.size_greater_than)
    elif f.form == "lt":
        inner = el("ObjectSizeLessThan", f.size_less_than)
    elif f.form == "and":
        parts = [el("Prefix", f.prefix)] if f.prefix else []
        parts += [_tag_xml(k, v) for k, v in f.tags]
        if f.size_greater_than is not None:
            parts.append(el("ObjectSizeGreaterThan", f.size_greater_than))
        if f.size_less_than is not None:
            parts.append(el("ObjectSizeLessThan", f.size_less_than))
        inner = f"<And>{''.join(parts)}</And>"
    else:
        inner = ""
    return f"<Filter>{inner}</Filter>"


def rule_xml(rule: Rule) -> str:
    parts = [el("ID", rule.id), _filter_xml(rule.filter),
             el("Status", "Enabled" if rule.enabled else "Disabled")]
    if rule.expiration_days is not None:
        parts.append(f"<Expiration>{el('Days', rule.expiration_days)}</Expiration>")
    elif rule.expiration_date is not None:
        parts.append(f"<Expiration>{el('Date', rule.expiration_date)}</Expiration>")
    elif rule.expired_object_delete_marker is not None:
        value = "true" if rule.expired_object_delete_marker else "false"
        parts.append(f"<Expiration>{el('ExpiredObjectDeleteMarker', value)}</Expiration>")
    if rule.noncurrent_days is not None:
        newer = "" if rule.newer_noncurrent_versions is None else \
            el("NewerNoncurrentVersions", rule.newer_noncurrent_versions)
        parts.append("<NoncurrentVersionExpiration>"
                     f"{el('NoncurrentDays', rule.noncurrent_days)}{newer}"
                     "</NoncurrentVersionExpiration>")
    if rule.abort_days is not None:
        parts.append("<AbortIncompleteMultipartUpload>"
                     f"{el('DaysAfterInitiation', rule.abort_days)}"
                     "</AbortIncompleteMultipartUpload>")
    return f"<Rule>{''.join(parts)}</Rule>"


async def put_bucket_lifecycle(req: S3Request) -> Response:
    require_integrity_header(req)
    rules = parse_rules(await req.read_document())
    await req.service.put_bucket_lifecycle(req.bucket, rules)
    return empty_response(200)


async def get_bucket_lifecycle(req: S3Request) -> Response:
    rules = await req.service.get_bucket_lifecycle(req.bucket)
    if rules is None:
        raise NoSuchLifecycleConfiguration(resource=req.bucket)
    return xml_response("LifecycleConfiguration", [rule_xml(rule) for rule in rules])


async def delete_bucket_lifecycle(req: S3Request) -> Response:
    await req.service.head_bucket(req.bucket)
    await req.service.delete_bucket_lifecycle(req.bucket)
    return empty_response(204)


HANDLERS = {
    "PutBucketLifecycleConfiguration": put_bucket_lifecycle,
    "GetBucketLifecycleConfiguration": get_bucket_lifecycle,
    "DeleteBucketLifecycle": delete_bucket_lifecycle,
}
