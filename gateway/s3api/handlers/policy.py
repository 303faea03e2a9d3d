"""Put/Get/DeleteBucketPolicy and GetBucketPolicyStatus. Who may call them (the bucket's
owner, the admin) is decided by the authorization point, not here."""

from __future__ import annotations

from starlette.responses import Response

from gateway.auth.bucket_access import refuse_public_policy
from gateway.auth.policy import MAX_POLICY_SIZE, bucket_policy, parse_policy
from gateway.protocol.errors import MalformedPolicy, NoSuchBucketPolicy
from gateway.protocol.responses import empty_response, xml_response
from gateway.protocol.xml import el
from gateway.s3api.context import S3Request

# A document is measured without its whitespace; the body may carry some more.
MAX_POLICY_BODY = 4 * MAX_POLICY_SIZE


async def _read_policy(req: S3Request) -> bytes:
    return await req.read_document(limit=MAX_POLICY_BODY, too_large=lambda: MalformedPolicy(
        "Policy exceeds the maximum allowed document size."))


async def put_bucket_policy(req: S3Request) -> Response:
    policy = parse_policy(await _read_policy(req), req.bucket)
    await refuse_public_policy(req.service.configs, req.bucket, policy.is_public)
    await req.service.put_bucket_policy(req.bucket, policy.text)
    return empty_response(204)


async def get_bucket_policy(req: S3Request) -> Response:
    text = await req.service.get_bucket_policy(req.bucket)
    if text is None:
        raise NoSuchBucketPolicy(resource=req.bucket)
    return Response(text.encode(), media_type="application/json")


async def delete_bucket_policy(req: S3Request) -> Response:
    await req.service.delete_bucket_policy(req.bucket)
    return empty_response(204)


async def get_bucket_policy_status(req: S3Request) -> Response:
    await req.service.head_bucket(req.bucket)
    policy = await bucket_policy(req.service.configs, req.bucket)
    if policy is None:
        raise NoSuchBucketPolicy(resource=req.bucket)
    return xml_response("PolicyStatus", [el("IsPublic", "true" if policy.is_public
                                                 else "false")])


HANDLERS = {
    "PutBucketPolicy": put_bucket_policy,
    "GetBucketPolicy": get_bucket_policy,
    "DeleteBucketPolicy": delete_bucket_policy,
    "GetBucketPolicyStatus": get_bucket_policy_status,
}
