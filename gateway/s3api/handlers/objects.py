"""Object-level operations: PUT/GET/HEAD/DELETE, copy and tagging."""

from __future__ import annotations

from starlette.responses import Response

from backends.core.base import ObjectInfo
from backends.core.numbers import natural
from backends.core.upload_checksums import checksum_type
from backends.multipart import MAX_PART_NUMBER, part_checksum, parts_count
from gateway.protocol.errors import (
    InvalidArgument,
    InvalidRequest,
    MissingContentLength,
    NotModified,
)
from gateway.protocol.parts import part_range
from gateway.protocol.responses import ObjectStreamResponse, empty_response, xml_response
from gateway.protocol.xml import el, iso8601
from gateway.s3api import headers as h
from gateway.s3api.checksum_headers import object_checksum_headers
from gateway.s3api.context import S3Request
from gateway.s3api.handlers import acl
from gateway.s3api.tagging import parse_tagging, tag_set_xml
from gateway.versioning.ids import NULL
from gateway.versioning.objects import DeleteOutcome


def version_id(req: S3Request) -> str | None:
    """The ``versionId`` query parameter (None when absent)."""
    value = req.query.get("versionId")
    if value == "":
        raise InvalidArgument("Version id cannot be the empty string")
    return value


def delete_headers(outcome: DeleteOutcome) -> dict[str, str]:
    out = {}
    if outcome.version_id is not None:
        out["x-amz-version-id"] = outcome.version_id
    if outcome.delete_marker:
        out["x-amz-delete-marker"] = "true"
    return out


def write_headers(info: ObjectInfo) -> dict[str, str]:
    out = {"etag": f'"{info.etag}"'}
    if info.version_id is not None and info.version_id != NULL:
        out["x-amz-version-id"] = info.version_id
    out.update(object_checksum_headers(info))
    return out


async def put_object(req: S3Request) -> Response:
    if "content-length" not in req.headers and "x-amz-decoded-content-length" not in \
            req.headers and "chunked" not in req.headers.get("transfer-encoding", ""):
        raise MissingContentLength()
    if_match = req.headers.get("if-match")
    raw_offset = req.headers.get("x-amz-write-offset-bytes")
    if raw_offset is not None:
        offset = natural(raw_offset.strip())
        if offset is None:
            raise InvalidArgument("x-amz-write-offset-bytes must be a non-negative integer.")
        length = req.headers.get("x-amz-decoded-content-length",
                                 req.headers.get("content-length"))
        if length == "0":
            raise InvalidRequest("Request body cannot be empty when 'write offset' is "
                                 "specified.")
        reserved = {k: v for k, v in (await acl.object_acl_changes(req)).items()
                    if v is not None}
        info = await req.service.append_object(
            req.bucket, req.key, offset, req.body(), meta=h.object_meta(req.headers),
            if_match=if_match, reserved=reserved)
        return empty_response(200, write_headers(info))
    info = await req.service.put_object(
        req.bucket, req.key, req.body(),
        meta=await acl.with_object_acl(req, h.object_meta(req.headers)),
        content_md5=h.content_md5(req.headers),
        if_match=if_match, if_none_match=req.headers.get("if-none-match"))
    return empty_response(200, write_headers(info))


def _overrides(req: S3Request) -> dict[str, str]:
    """The ``response-*`` query overrides, checked before anything is opened."""
    query = req.query
    return {header: h.header_value(param, query[param])
            for param, header in h.RESPONSE_OVERRIDES.items() if param in query}


def _read_headers(req: S3Request, info: ObjectInfo, overrides: dict[str, str], *,
                  ranged: bool) -> dict[str, str]:
    # A full-object checksum describes no range, so S3 sends none with a 206.
    checksum_mode = req.headers.get("x-amz-checksum-mode", "").upper() == "ENABLED"
    out = h.object_headers(info, checksum_mode=checksum_mode and not ranged)
    if overrides:
        out.update(overrides)
    return out


def _part_number(req: S3Request) -> int | None:
    """``?partNumber=N`` (1..10000), which cannot be combined with a Range header."""
    raw = req.query.get("partNumber")
    if raw is None:
        return None
    number = natural(raw)
    if number is None or not 1 <= number <= MAX_PART_NUMBER:
        raise InvalidArgument("Part number must be an integer between 1 and 10000, inclusive")
    if "range" in req.headers:
        raise InvalidRequest("Cannot specify both Range header and partNumber query "
                             "parameter.")
    return number


def _parts_headers(info: ObjectInfo, part: int | None) -> dict[str, str]:
    """A part read's part count and, when recorded, the part's checksum (with the
    object's checksum type)."""
    count = parts_count(info.etag) if part is not None else None
    if count is None or part is None:
        return {}
    out = {"x-amz-mp-parts-count": str(count)}
    checksum = part_checksum(info, part)
    if checksum is not None and info.meta.checksum is not None:
        out[f"x-amz-checksum-{checksum[0].lower()}"] = checksum[1]
        out["x-amz-checksum-type"] = checksum_type(info.meta.checksum[1])
    return out


async def get_object(req: S3Request) -> Response:
    part = _part_number(req)
    overrides = _overrides(req)
    byte_range = h.byte_range(req.headers.get("range"))
    try:
        stream = await req.service.get_object(req.bucket, req.key, byte_range=byte_range,
                                              conditions=h.conditions(req.headers),
                                              version_id=version_id(req), part_number=part)
    except NotModified as exc:
        return _not_modified(exc)
    ranged = byte_range is not None or part is not None
    headers = _read_headers(req, stream.info, overrides, ranged=ranged)
    headers.update(_parts_headers(stream.info, part))
    status = 200
    if stream.byte_range is not None and ranged:
        r = stream.byte_range
        headers["content-range"] = f"bytes {r.start}-{r.end}/{stream.info.size}"
        status = 206
    return ObjectStreamResponse(stream, status=status, headers=headers)


async def head_object(req: S3Request) -> Response:
    part = _part_number(req)
    overrides = _overrides(req)
    try:
        info = await req.service.head_object(req.bucket, req.key,
                                             conditions=h.conditions(req.headers),
                                             version_id=version_id(req))
    except NotModified as exc:
        return _not_modified(exc)
    byte_range = h.byte_range(req.headers.get("range"))
    headers = _read_headers(req, info, overrides,
                            ranged=byte_range is not None or part is not None)
    headers.update(_parts_headers(info, part))
    status = 200
    length = info.size
    resolved = part_range(info, part) if part is not None else \
        byte_range.resolve(info.size) if byte_range is not None else None
    if resolved is not None:
        headers["content-range"] = f"bytes {resolved.start}-{resolved.end}/{info.size}"
        length = resolved.length
        status = 206
    response = empty_response(status, headers)
    response.headers["content-length"] = str(length)
    return response


def _not_modified(exc: NotModified) -> Response:
    if exc.info is None:
        raise exc
    return empty_response(304, h.not_modified_headers(exc.info))


async def delete_object(req: S3Request) -> Response:
    outcome = await req.service.delete_object(req.bucket, req.key, version_id=version_id(req))
    return empty_response(204, delete_headers(outcome))


async def copy_object(req: S3Request) -> Response:
    source = h.copy_source(req.headers)
    if source.byte_range is not None:
        raise InvalidArgument("x-amz-copy-source-range is only allowed with UploadPartCopy.")
    h.check_storage_class(req.headers)
    directive = req.headers.get("x-amz-metadata-directive", "COPY").upper()
    tag_directive = req.headers.get("x-amz-tagging-directive", "COPY").upper()
    if directive not in ("COPY", "REPLACE") or tag_directive not in ("COPY", "REPLACE"):
        raise InvalidArgument("Unknown metadata or tagging directive.")
    if (source.bucket, source.key, source.version_id) == (req.bucket, req.key, None) \
            and directive == "COPY":
        raise InvalidRequest("This copy request is illegal because it is trying to copy an "
                             "object to itself without changing the object's metadata, "
                             "storage class, website redirect location or encryption "
                             "attributes.")
    meta = h.object_meta(req.headers, with_tags=False) if directive == "REPLACE" else None
    tags = h.parse_tagging_header(req.headers.get("x-amz-tagging", "")) \
        if tag_directive == "REPLACE" else None
    result = await req.service.copy_object(source, req.bucket, req.key, meta=meta, tags=tags,
                                           user_changes=await acl.object_acl_changes(req))
    info = result.info
    parts = [el("LastModified", iso8601(info.last_modified)), el("ETag", f'"{info.etag}"')]
    if info.meta.checksum is not None:
        parts.append(el(f"Checksum{info.meta.checksum[0]}", info.meta.checksum[1]))
    headers = {k: v for k, v in write_headers(info).items() if k == "x-amz-version-id"}
    if result.source_version_id is not None:
        headers["x-amz-copy-source-version-id"] = result.source_version_id
    return xml_response("CopyObjectResult", parts, headers=headers)


def _version_header(info: ObjectInfo) -> dict[str, str]:
    return {} if info.version_id is None else {"x-amz-version-id": info.version_id}


async def get_object_tagging(req: S3Request) -> Response:
    info = await req.service.head_object(req.bucket, req.key, version_id=version_id(req))
    return xml_response("Tagging", [tag_set_xml(info.meta.tags)],
                        headers=_version_header(info))


async def put_object_tagging(req: S3Request) -> Response:
    tags = parse_tagging(await req.read_document())
    h.check_tags(tags)
    info = await req.service.replace_tags(req.bucket, req.key, tags,
                                          version_id=version_id(req))
    return empty_response(200, _version_header(info))


async def delete_object_tagging(req: S3Request) -> Response:
    info = await req.service.replace_tags(req.bucket, req.key, {},
                                          version_id=version_id(req))
    return empty_response(204, _version_header(info))


HANDLERS = {
    "PutObject": put_object,
    "GetObject": get_object,
    "HeadObject": head_object,
    "DeleteObject": delete_object,
    "CopyObject": copy_object,
    "GetObjectTagging": get_object_tagging,
    "PutObjectTagging": put_object_tagging,
    "DeleteObjectTagging": delete_object_tagging,
}
