"""Bucket tagging: Put/Get/DeleteBucketTagging."""

from __future__ import annotations

from starlette.responses import Response

from gateway.protocol.errors import NoSuchTagSet
from gateway.protocol.responses import empty_response, xml_response
from gateway.s3api import headers as h
from gateway.s3api.context import S3Request
from gateway.s3api.handlers.cors import require_integrity_header
from gateway.s3api.tagging import parse_tagging, tag_set_xml

MAX_BUCKET_TAGS = 50


async def put_bucket_tagging(req: S3Request) -> Response:
    require_integrity_header(req)
    tags = parse_tagging(await req.read_document())
    h.check_tags(tags, limit=MAX_BUCKET_TAGS, what="Bucket")
    await req.service.put_bucket_tagging(req.bucket, tags)
    return empty_response(204)


async def get_bucket_tagging(req: S3Request) -> Response:
    tags = await req.service.get_bucket_tagging(req.bucket)
    if tags is None:
        raise NoSuchTagSet(resource=req.bucket)
    return xml_response("Tagging", [tag_set_xml(tags)])


async def delete_bucket_tagging(req: S3Request) -> Response:
    await req.service.delete_bucket_tagging(req.bucket)
    return empty_response(204)


HANDLERS = {
    "PutBucketTagging": put_bucket_tagging,
    "GetBucketTagging": get_bucket_tagging,
    "DeleteBucketTagging": delete_bucket_tagging,
}
