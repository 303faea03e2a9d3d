"""POST Object: a browser upload, an HTML form carrying a signed policy and the file.

The form authenticates itself (:mod:`gateway.s3api.post_policy`), so the endpoint lets
the request through unsigned and this handler decides: signature, policy, then the
signer's right to write the key, as a PutObject of that user. The file streams from the
form into the write; its length is checked against the policy as it arrives.
"""

from __future__ import annotations

import dataclasses
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from starlette.responses import Response

from gateway.auth.access import request_origin
from gateway.auth.users import User
from gateway.protocol.errors import AccessDenied, InvalidArgument
from gateway.protocol.responses import XML_TYPE, empty_response
from gateway.protocol.xml import document, el
from gateway.s3api import headers as h
from gateway.s3api.body import request_body
from gateway.s3api.context import S3Request, object_url
from gateway.s3api.handlers import acl
from gateway.s3api.handlers.objects import write_headers
from gateway.s3api.post_form import base_filename, read_form
from gateway.s3api.post_policy import LengthRange, check_conditions, verify
from gateway.s3api.tagging import parse_tagging

#: form fields that become the request headers of the write, by their own name
_HEADER_FIELDS = ("content-type", "cache-control", "content-disposition", "content-encoding",
                  "content-language", "expires", "content-md5")
_MISSING_KEY = "Bucket POST must contain a field named 'key'.  If it is specified, please " \
               "check the order of the fields."


@dataclass(frozen=True, slots=True)
class FormKeys:
    """What the handler needs to know the form's signer."""

    secret_for: Callable[[str], str | None]
    user_for: Callable[[str], User | None]


def form_headers(fields: dict[str, str]) -> dict[str, str]:
    """The write's request headers, from the form's fields."""
    out = {name: value for name, value in fields.items()
           if name in _HEADER_FIELDS or name.startswith("x-amz-")}
    for name in ("x-amz-signature", "x-amz-credential", "x-amz-algorithm", "x-amz-date"):
        out.pop(name, None)
    if "acl" in fields:
        out["x-amz-acl"] = fields["acl"]
    if fields.get("tagging"):
        tags = parse_tagging(fields["tagging"].encode("utf-8"))
        h.check_tags(tags)
        out["x-amz-tagging"] = urllib.parse.urlencode(tags)
    return out


async def _bounded(source: AsyncIterator[bytes], limit: LengthRange | None,
                   ) -> AsyncIterator[bytes]:
    size = 0
    async for chunk in source:
        size += len(chunk)
        if limit is not None:
            limit.check_growing(size)
        yield chunk
    if limit is not None:
        limit.check_final(size)


async def post_object(req: S3Request, *, keys: FormKeys) -> Response:
    form = await read_form(req.body(), req.headers.get("content-type", ""))
    fields = form.fields
    key = fields.get("key")
    if key is None:
        raise InvalidArgument(_MISSING_KEY)
    if form.filename:
        key = key.replace("${filename}", base_filename(form.filename))
    if not key:
        raise InvalidArgument("User key must have a length greater than 0.")
    signer = verify(fields, keys.secret_for)
    policy = signer.policy
    if policy is not None:
        check_conditions(policy, {**fields, "key": key, "bucket": req.bucket}, form.names,
                         time.time())
    user = keys.user_for(signer.access_key) if signer.access_key else None
    headers = form_headers(fields)
    write = dataclasses.replace(req, operation="PutObject", key=key, headers=headers,
                                user=user)
    if req.access is None and not signer.access_key:
        raise AccessDenied()  # no users, no ACLs: every write is signed
    if req.access is not None and (user is None or not user.admin):
        source_ip, secure = request_origin(req.request.scope)
        write.bucket_access = await req.access.authorize(
            user, "PutObject", req.bucket, key, query={}, headers=headers,
            source_ip=source_ip, secure=secure)
    body = request_body(_bounded(form.file, policy.length if policy else None), headers,
                        req.auth)
    info = await req.service.put_object(
        req.bucket, key, body, meta=await acl.with_object_acl(write, h.object_meta(headers)),
        content_md5=h.content_md5(headers))
    out = write_headers(info)
    location = object_url(write)
    redirect = fields.get("success_action_redirect") or fields.get("redirect")
    if redirect:
        query = urllib.parse.urlencode({"bucket": req.bucket, "key": key,
                                        "etag": f'"{info.etag}"'},
                                       quote_via=urllib.parse.quote)
        target = f"{redirect}{'&' if '?' in redirect else '?'}{query}"
        return empty_response(303, {**out, "location": target})
    out["location"] = location
    status = fields.get("success_action_status", "")
    if status == "201":
        # S3's PostResponse carries no namespace.
        return Response(document("PostResponse", [
            el("Location", location), el("Bucket", req.bucket), el("Key", key),
            el("ETag", f'"{info.etag}"')], namespace=False), status_code=201, headers=out,
            media_type=XML_TYPE)
    return empty_response(200 if status == "200" else 204, out)
