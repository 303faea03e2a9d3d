"""Multipart upload operations."""

from __future__ import annotations

from starlette.responses import Response

from backends.core.base import CompletedPart
from backends.core.numbers import natural
from backends.multipart import MAX_PART_NUMBER
from gateway.protocol.errors import InvalidArgument, MalformedPartNumber, MalformedXML
from gateway.protocol.responses import empty_response, xml_response
from gateway.protocol.xml import INITIATOR, OWNER, el, etag_el, iso8601, opt, parse, text
from gateway.s3api import checksum_headers as ch
from gateway.s3api import headers as h
from gateway.s3api.context import S3Request, object_url
from gateway.s3api.handlers import acl
from gateway.s3api.handlers.objects import write_headers, write_if_none_match


def _upload_id(req: S3Request) -> str:
    upload_id = req.query.get("uploadId", "")
    if not upload_id:
        raise InvalidArgument("This operation needs a non-empty uploadId.")
    return upload_id


def _part_number(req: S3Request) -> int:
    number = natural(req.query.get("partNumber", ""))
    if number is None or not 1 <= number <= MAX_PART_NUMBER:
        raise MalformedPartNumber()
    return number


async def create_multipart_upload(req: S3Request) -> Response:
    spec = ch.upload_checksum(req.headers)
    meta = await acl.with_object_acl(req, h.object_meta(req.headers))
    upload = await req.service.create_multipart_upload(
        req.bucket, req.key, meta=meta, checksum=spec)
    parts = [el("Bucket", req.bucket), el("Key", req.key), el("UploadId", upload.upload_id)]
    return xml_response("InitiateMultipartUploadResult", parts,
                        headers=ch.upload_headers(spec))


async def upload_part(req: S3Request) -> Response:
    part = await req.service.upload_part(req.bucket, req.key, _upload_id(req),
                                         _part_number(req), req.body(),
                                         content_md5=h.content_md5(req.headers))
    headers = {"etag": f'"{part.etag}"'}
    if part.checksum is not None:
        headers[f"x-amz-checksum-{part.checksum[0].lower()}"] = part.checksum[1]
    return empty_response(200, headers)


async def upload_part_copy(req: S3Request) -> Response:
    source = h.copy_source(req.headers)
    part, source_version = await req.service.upload_part_copy(
        source, req.bucket, req.key, _upload_id(req), _part_number(req))
    headers = {} if source_version is None else \
        {"x-amz-copy-source-version-id": source_version}
    return xml_response("CopyPartResult", [el("LastModified", iso8601(part.last_modified)),
                                           el("ETag", f'"{part.etag}"'),
                                           ch.checksum_elements(part.checksum,
                                                                with_type=False)],
                        headers=headers)


async def complete_multipart_upload(req: S3Request) -> Response:
    checksum_type = ch.requested_type(req.headers)
    expected = ch.object_checksum(req.headers)
    root = parse(await req.read_document(ch.without_checksum_headers(req.headers)),
                 "CompleteMultipartUpload")
    requested = []
    for node in root.findall("Part"):
        number = natural((text(node, "PartNumber", required=True) or "").strip())
        etag = (text(node, "ETag", required=True) or "").strip()
        if number is None:
            raise MalformedXML("PartNumber must be an integer.")
        requested.append(CompletedPart(number, etag.strip('"'), ch.part_checksums(node)))
    if_match = req.headers.get("if-match")
    info = await req.service.complete_multipart_upload(
        req.bucket, req.key, _upload_id(req), requested,
        if_match=if_match.strip('"') if if_match else None, if_none_match=write_if_none_match(req),
        checksum_type=checksum_type, checksum=expected)
    parts = [el("Location", object_url(req)), el("Bucket", req.bucket),
             el("Key", req.key), el("ETag", f'"{info.etag}"'),
             ch.checksum_elements(info.meta.checksum)]
    return xml_response("CompleteMultipartUploadResult", parts,
                        headers={k: v for k, v in write_headers(info).items() if k != "etag"})


async def abort_multipart_upload(req: S3Request) -> Response:
    await req.service.abort_multipart_upload(req.bucket, req.key, _upload_id(req))
    return empty_response(204)


async def list_parts(req: S3Request) -> Response:
    upload_id = _upload_id(req)
    max_parts = req.int_query("max-parts", 1000, high=1000)
    marker = req.int_query("part-number-marker", 0)
    parts = [p for p in await req.service.list_parts(req.bucket, req.key, upload_id)
             if p.part_number > marker]
    spec = await req.service.upload_checksum(req.bucket, req.key, upload_id)
    page, truncated = parts[:max_parts], len(parts) > max_parts
    items = "".join(
        f"<Part>{el('PartNumber', p.part_number)}{el('LastModified', iso8601(p.last_modified))}"
        f"{etag_el(p.etag)}{el('Size', p.size)}"
        f"{ch.checksum_elements(p.checksum, with_type=False)}</Part>" for p in page)
    declared = "" if spec is None else \
        el("ChecksumAlgorithm", spec.algorithm) + el("ChecksumType", spec.type)
    out = [el("Bucket", req.bucket), el("Key", req.key), el("UploadId", upload_id),
           el("PartNumberMarker", marker),
           opt("NextPartNumberMarker", page[-1].part_number if truncated else None),
           el("MaxParts", max_parts), el("IsTruncated", str(truncated).lower()),
           INITIATOR, OWNER,
           "<StorageClass>STANDARD</StorageClass>", declared, items]
    return xml_response("ListPartsResult", out)


HANDLERS = {
    "CreateMultipartUpload": create_multipart_upload,
    "UploadPart": upload_part,
    "UploadPartCopy": upload_part_copy,
    "CompleteMultipartUpload": complete_multipart_upload,
    "AbortMultipartUpload": abort_multipart_upload,
    "ListParts": list_parts,
}
