"""CORS: Put/Get/DeleteBucketCors, preflight OPTIONS, and the headers of real responses."""

from __future__ import annotations

from collections.abc import Mapping
from xml.etree.ElementTree import Element

from starlette.responses import Response

from backends.core.numbers import natural
from gateway.protocol.cors import MAX_RULES, METHODS, CorsRule, first_match
from gateway.protocol.errors import (
    BadRequest,
    CORSForbidden,
    InvalidArgument,
    InvalidRequest,
    MalformedXML,
    NoSuchCORSConfiguration,
)
from gateway.protocol.responses import empty_response, xml_response
from gateway.protocol.xml import el, opt, parse
from gateway.s3api.context import S3Request
from gateway.service.objects import ObjectService

MAX_ID = 255


def require_integrity_header(req: S3Request) -> None:
    """Configuration uploads need Content-MD5 or an additional checksum, as on S3."""
    if "content-md5" not in req.headers and not any(
            h.startswith("x-amz-checksum-") or h == "x-amz-sdk-checksum-algorithm"
            for h in req.headers):
        raise InvalidRequest("Missing required header for this request: Content-MD5 or "
                             "x-amz-checksum-*")


def _texts(node: Element, tag: str) -> tuple[str, ...]:
    return tuple((child.text or "").strip() for child in node.findall(tag))


def _one_wildcard(kind: str, values: tuple[str, ...]) -> None:
    for value in values:
        if value.count("*") > 1:
            raise InvalidRequest(f'{kind} "{value}" can not have more than one wildcard.')


def parse_rules(document: bytes) -> list[CorsRule]:
    root = parse(document, "CORSConfiguration")
    nodes = root.findall("CORSRule")
    if not nodes:
        raise MalformedXML("The CORS configuration needs at least one CORSRule.")
    if len(nodes) > MAX_RULES:
        raise MalformedXML(f"The CORS configuration may hold at most {MAX_RULES} rules.")
    rules = []
    for node in nodes:
        origins, methods = _texts(node, "AllowedOrigin"), _texts(node, "AllowedMethod")
        if not origins or not methods:
            raise MalformedXML("Every CORSRule needs an AllowedOrigin and an AllowedMethod.")
        for method in methods:
            if method not in METHODS:
                raise InvalidRequest("Found unsupported HTTP method in CORS config. "
                                     f"Unsupported method is {method}")
        headers = _texts(node, "AllowedHeader")
        _one_wildcard("AllowedOrigin", origins)
        _one_wildcard("AllowedHeader", headers)
        max_age = node.find("MaxAgeSeconds")
        seconds = None
        if max_age is not None:
            seconds = natural((max_age.text or "").strip())
            if seconds is None:
                raise MalformedXML("MaxAgeSeconds must be a non-negative integer.")
        rule_id = node.find("ID")
        ident = None if rule_id is None else (rule_id.text or "").strip()
        if ident is not None and len(ident) > MAX_ID:
            raise InvalidArgument(f"The ID of a CORSRule may be at most {MAX_ID} characters.")
        rules.append(CorsRule(origins, methods, headers, _texts(node, "ExposeHeader"),
                              seconds, ident))
    return rules


async def put_bucket_cors(req: S3Request) -> Response:
    require_integrity_header(req)
    rules = parse_rules(await req.read_document())
    await req.service.put_bucket_cors(req.bucket, rules)
    return empty_response(200)


async def get_bucket_cors(req: S3Request) -> Response:
    rules = await req.service.get_bucket_cors(req.bucket)
    if rules is None:
        raise NoSuchCORSConfiguration(resource=req.bucket)
    parts = []
    for rule in rules:
        items = [opt("ID", rule.id)]
        items += [el("AllowedHeader", v) for v in rule.allowed_headers]
        items += [el("AllowedMethod", v) for v in rule.allowed_methods]
        items += [el("AllowedOrigin", v) for v in rule.allowed_origins]
        items += [el("ExposeHeader", v) for v in rule.expose_headers]
        items.append(opt("MaxAgeSeconds", rule.max_age_seconds))
        parts.append(f"<CORSRule>{''.join(items)}</CORSRule>")
    return xml_response("CORSConfiguration", parts)


async def delete_bucket_cors(req: S3Request) -> Response:
    await req.service.delete_bucket_cors(req.bucket)
    return empty_response(204)


def _rule_headers(rule: CorsRule, origin: str) -> dict[str, str]:
    out = {"access-control-allow-origin": "*" if rule.any_origin else origin,
           "access-control-allow-methods": ", ".join(rule.allowed_methods)}
    if not rule.any_origin:
        out["access-control-allow-credentials"] = "true"
    if rule.expose_headers:
        out["access-control-expose-headers"] = ", ".join(rule.expose_headers)
    if rule.max_age_seconds is not None:
        out["access-control-max-age"] = str(rule.max_age_seconds)
    return out


async def preflight(req: S3Request) -> Response:
    """OPTIONS: answered from the bucket's rules, unauthenticated, as browsers send it."""
    origin = req.headers.get("origin")
    if not origin:
        raise BadRequest("Insufficient information. Origin request header needed.")
    method = req.headers.get("access-control-request-method", "")
    if method not in METHODS:
        raise BadRequest(f"Invalid Access-Control-Request-Method: {method or 'null'}")
    raw_headers = req.headers.get("access-control-request-headers", "")
    asked = [h.strip().lower() for h in raw_headers.split(",") if h.strip()]
    rules = await req.service.cors_rules(req.bucket)
    if rules is None:
        raise CORSForbidden("CORSResponse: CORS is not enabled for this bucket.")
    rule = first_match(rules, origin, method, asked)
    if rule is None:
        raise CORSForbidden()
    headers = _rule_headers(rule, origin)
    if asked:
        headers["access-control-allow-headers"] = ", ".join(asked)
    headers["vary"] = "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"
    return empty_response(200, headers)


async def response_headers(service: ObjectService, bucket: str,
                           headers: Mapping[str, str], method: str) -> dict[str, str]:
    """The CORS headers of a real response to a request from a browser origin (none when
    no rule allows it)."""
    origin = headers.get("origin")
    if not origin or not bucket:
        return {}
    rules = await service.cors_rules(bucket)
    rule = first_match(rules or [], origin, method)
    if rule is None:
        return {}
    return {**_rule_headers(rule, origin), "vary": "Origin"}


HANDLERS = {
    "PutBucketCors": put_bucket_cors,
    "GetBucketCors": get_bucket_cors,
    "DeleteBucketCors": delete_bucket_cors,
    "PreflightRequest": preflight,
}
