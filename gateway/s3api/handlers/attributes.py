"""GetObjectAttributes: an object's ETag, checksum, parts, storage class and size."""

from __future__ import annotations

from starlette.responses import Response

from backends.core.base import ObjectInfo
from backends.core.numbers import INT32_MAX, natural
from backends.multipart import part_sizes, parts_count
from gateway.protocol.errors import InvalidArgument, NotModified
from gateway.protocol.responses import empty_response, xml_response
from gateway.protocol.xml import el, opt
from gateway.s3api import headers as h
from gateway.s3api.checksum_headers import checksum_elements
from gateway.s3api.context import S3Request
from gateway.s3api.handlers.objects import version_id

ATTRIBUTES = ("ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize")
MAX_PARTS = 1000


def _attributes(req: S3Request) -> set[str]:
    raw = req.headers.get("x-amz-object-attributes", "")
    names = {item.strip() for item in raw.split(",") if item.strip()}
    if not names:
        raise InvalidArgument("Missing required header for this request: "
                              "x-amz-object-attributes")
    if not names <= set(ATTRIBUTES):
        raise InvalidArgument("Invalid attribute name specified.")
    return names


def _int_header(req: S3Request, name: str, default: int) -> int:
    raw = req.headers.get(name, "").strip()
    if not raw:
        return default
    value = natural(raw)
    if value is None or value > INT32_MAX:
        raise InvalidArgument(f"Provided {name} not an integer or within integer range")
    return value


def _object_parts(info: ObjectInfo, max_parts: int, marker: int) -> str:
    """``<ObjectParts>`` of a multipart object ("" for a single-part one). As on S3, the
    ``<Part>`` entries are listed only for an object with an additional checksum; the part
    sizes are the ones recorded at completion."""
    count = parts_count(info.etag)
    if count is None:
        return ""
    sizes = part_sizes(info) if info.meta.checksum is not None else None
    numbers = [n for n in range(1, count + 1) if n > marker] if sizes is not None else []
    page, truncated = numbers[:max_parts], len(numbers) > max_parts
    items = "".join(f"<Part>{el('PartNumber', n)}{el('Size', sizes[n - 1])}</Part>"
                    for n in page) if sizes is not None else ""
    return ("<ObjectParts>" + el("PartsCount", count) + el("PartNumberMarker", marker)
            + opt("NextPartNumberMarker", page[-1] if truncated and page else None)
            + el("MaxParts", max_parts) + el("IsTruncated", str(truncated).lower())
            + items + "</ObjectParts>")


async def get_object_attributes(req: S3Request) -> Response:
    names = _attributes(req)
    max_parts = min(_int_header(req, "x-amz-max-parts", MAX_PARTS), MAX_PARTS)
    marker = _int_header(req, "x-amz-part-number-marker", 0)
    try:
        info = await req.service.head_object(req.bucket, req.key,
                                             conditions=h.conditions(req.headers),
                                             version_id=version_id(req))
    except NotModified as exc:
        if exc.info is None:
            raise
        return empty_response(304, h.not_modified_headers(exc.info))
    headers = {"last-modified": h.format_http_date(info.last_modified)}
    if info.version_id is not None:
        headers["x-amz-version-id"] = info.version_id
    out = []
    if "ETag" in names:
        out.append(el("ETag", info.etag))
    if "Checksum" in names and info.meta.checksum is not None:
        # A composite value is shown without its "-N" (the part count is in ObjectParts).
        out.append("<Checksum>" + checksum_elements(info.meta.checksum, bare=True)
                   + "</Checksum>")
    if "ObjectParts" in names:
        out.append(_object_parts(info, max_parts, marker))
    if "StorageClass" in names:
        out.append(el("StorageClass", h.storage_class(info.meta)))
    if "ObjectSize" in names:
        out.append(el("ObjectSize", info.size))
    return xml_response("GetObjectAttributesResponse", out, headers=headers)


HANDLERS = {"GetObjectAttributes": get_object_attributes}
