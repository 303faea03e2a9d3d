"""ACLs, object ownership and the public access block: Get/PutBucketAcl,
Get/PutObjectAcl, Put/Get/DeleteBucketOwnershipControls, Put/Get/DeletePublicAccessBlock,
and the owner and ACL of what CreateBucket, PutObject, CopyObject and
CreateMultipartUpload write (docs/security.md, "Ownership and ACLs")."""

from __future__ import annotations

from dataclasses import replace

from starlette.responses import Response

from backends.core.base import ObjectMeta
from backends.core.errors import NoSuchBucket
from gateway.auth.access import AccessControl
from gateway.auth.acl import (
    ACL_METADATA,
    ANONYMOUS_ID,
    Acl,
    from_headers,
    from_xml,
    grants_beyond,
    has_acl_headers,
    private,
    to_xml,
)
from gateway.auth.bucket_access import (
    DOCUMENT,
    BucketAccess,
    Ownership,
    PublicAccessBlock,
    new_bucket,
)
from gateway.protocol.errors import (
    AccessControlListNotSupported,
    AccessDenied,
    BucketAlreadyExists,
    InvalidArgument,
    InvalidBucketAclWithObjectOwnership,
    MalformedXML,
    NoSuchPublicAccessBlockConfiguration,
    NotImplementedOperation,
    OwnershipControlsNotFoundError,
)
from gateway.protocol.responses import empty_response, xml_response
from gateway.protocol.xml import el, parse, text
from gateway.s3api.context import S3Request

OWNERSHIP_HEADER = "x-amz-object-ownership"


def _access(req: S3Request) -> AccessControl:
    if req.access is None:
        raise NotImplementedOperation("Access control is not enabled on this endpoint.")
    return req.access


async def _settings(req: S3Request) -> BucketAccess:
    """The bucket's settings, as the authorization point read them if it did."""
    if req.bucket_access is not None:
        return req.bucket_access
    return await _access(req).bucket(req.bucket)


def _writer(req: S3Request) -> str:
    return req.user.canonical_id if req.user is not None else ANONYMOUS_ID


def _owner_only(acl: Acl) -> bool:
    """Whether an ACL gives nothing to anyone but its owner (allowed with ACLs disabled)."""
    return all(g.grantee == acl.owner for g in acl.grants)


def _check_public(acl: Acl, settings: BucketAccess) -> None:
    if acl.is_public and settings.block.block_public_acls:
        raise AccessDenied("Access Denied: the bucket's public access block has "
                           "BlockPublicAcls set.")


# -- what writes record ------------------------------------------------------------------


async def object_acl_changes(req: S3Request) -> dict[str, str | None]:
    """The owner and ACL entry of the user metadata of an object being written (None:
    no entry, the bucket owner owns it with a private ACL)."""
    access = req.access
    sent = has_acl_headers(req.headers)
    if access is None or (not sent and req.user is not None and req.user.admin):
        return {ACL_METADATA: None}
    settings = await _settings(req)
    if not settings.acls_enabled:
        # Accepted: no ACL, or one that only gives the bucket owner full control
        # (bucket-owner-full-control, private, or the same as grants).
        if sent:
            acl = from_headers(req.headers, owner=settings.owner,
                               bucket_owner=settings.owner, known=access.known)
            if acl is not None and grants_beyond(acl, req.headers):
                raise AccessControlListNotSupported()
        return {ACL_METADATA: None}
    writer = _writer(req)
    acl = from_headers(req.headers, owner=writer, bucket_owner=settings.owner,
                       known=access.known) or private(writer)
    if settings.ownership is Ownership.BUCKET_OWNER_PREFERRED and \
            req.headers.get("x-amz-acl", "").strip() == "bucket-owner-full-control":
        acl = private(settings.owner)
    _check_public(acl, settings)
    if acl == private(settings.owner):
        return {ACL_METADATA: None}
    return {ACL_METADATA: acl.encode()}


async def with_object_acl(req: S3Request, meta: ObjectMeta) -> ObjectMeta:
    """``meta`` with the owner and ACL of the object ``req`` writes."""
    value = (await object_acl_changes(req))[ACL_METADATA]
    return meta if value is None else replace(meta, user={**meta.user, ACL_METADATA: value})


async def create_bucket_access(req: S3Request) -> None:
    """Record the owner, ACL, ownership and public access block of a new bucket."""
    access = req.access
    if access is None:
        return
    raw = req.headers.get(OWNERSHIP_HEADER)
    try:
        ownership = None if raw is None else Ownership(raw.strip())
    except ValueError:
        raise InvalidArgument(f"Invalid x-amz-object-ownership header: {raw}") from None
    owner = _writer(req)
    settings = new_bucket(owner, ownership, access.new_buckets)
    acl = from_headers(req.headers, owner=owner, bucket_owner=owner, known=access.known)
    if acl is not None:
        if not settings.acls_enabled and grants_beyond(acl, req.headers):
            raise InvalidBucketAclWithObjectOwnership()
        settings = replace(settings, acl=acl)
    await req.service.put_bucket_config(req.bucket, DOCUMENT, settings.to_json())


def check_bucket_acl_headers(req: S3Request) -> None:
    """Refuse before creating a bucket what :func:`create_bucket_access` would refuse."""
    if req.access is None or not has_acl_headers(req.headers):
        return
    owner = _writer(req)
    acl = from_headers(req.headers, owner=owner, bucket_owner=owner, known=req.access.known)
    raw = req.headers.get(OWNERSHIP_HEADER, req.access.new_buckets.ownership.value).strip()
    if acl is not None and raw == Ownership.BUCKET_OWNER_ENFORCED.value and \
            grants_beyond(acl, req.headers):
        raise InvalidBucketAclWithObjectOwnership()


async def recreation_changes_acl(req: S3Request) -> bool:
    """Whether a CreateBucket of a bucket the caller already owns asks for another ACL
    than the bucket has (S3 then answers 409 BucketAlreadyOwnedByYou even in us-east-1);
    BucketAlreadyExists when the bucket is someone else's. False when there is no such
    bucket, no ACL header, or no access control."""
    access = req.access
    if access is None or not has_acl_headers(req.headers):
        return False
    try:
        await req.service.head_bucket(req.bucket)
    except NoSuchBucket:
        return False
    settings = await access.bucket(req.bucket)
    if req.user is not None and settings.owner != req.user.canonical_id:
        raise BucketAlreadyExists(resource=req.bucket)
    owner = settings.owner
    wanted = from_headers(req.headers, owner=owner, bucket_owner=owner, known=access.known)
    current = settings.acl if settings.acls_enabled else private(owner)
    return wanted is not None and wanted != current


# -- ACLs --------------------------------------------------------------------------------


async def _requested_acl(req: S3Request, owner: str, bucket_owner: str) -> Acl:
    access = _access(req)
    acl = from_headers(req.headers, owner=owner, bucket_owner=bucket_owner,
                       known=access.known)
    if acl is not None:
        return acl
    document = await req.read_document()
    if not document.strip():
        raise MalformedXML("The request needs an AccessControlPolicy document or ACL "
                           "headers.")
    return replace(from_xml(document, known=access.known), owner=owner)


async def get_bucket_acl(req: S3Request) -> Response:
    settings = await _settings(req)
    acl = settings.acl if settings.acls_enabled else private(settings.owner)
    return xml_response("AccessControlPolicy", to_xml(acl, _access(req).name_of))


async def put_bucket_acl(req: S3Request) -> Response:
    owner = (await _settings(req)).owner  # ACLs never change owners
    acl = await _requested_acl(req, owner, owner)
    only_owner = not grants_beyond(acl, req.headers)

    def change(settings: BucketAccess) -> BucketAccess:
        if not settings.acls_enabled and not only_owner:
            raise AccessControlListNotSupported()
        _check_public(acl, settings)
        return replace(settings, acl=acl)

    await _access(req).change_bucket(req.bucket, change)
    return empty_response(200)


def version_id(req: S3Request) -> str | None:
    """The ``versionId`` query parameter (None when absent)."""
    value = req.query.get("versionId")
    if value == "":
        raise InvalidArgument("Version id cannot be the empty string")
    return value


def _version_headers(req: S3Request) -> dict[str, str]:
    vid = version_id(req)
    return {} if vid is None else {"x-amz-version-id": vid}


async def get_object_acl(req: S3Request) -> Response:
    settings = await _settings(req)
    acl = await _access(req).object_acl(req.bucket, req.key, version_id(req), settings)
    return xml_response("AccessControlPolicy", to_xml(acl, _access(req).name_of),
                        headers=_version_headers(req))


async def put_object_acl(req: S3Request) -> Response:
    settings = await _settings(req)
    current = await _access(req).object_acl(req.bucket, req.key, version_id(req), settings)
    acl = await _requested_acl(req, current.owner, settings.owner)
    if not settings.acls_enabled:
        if grants_beyond(acl, req.headers):
            raise AccessControlListNotSupported()
        return empty_response(200, _version_headers(req))
    _check_public(acl, settings)
    await req.service.change_user_metadata(req.bucket, req.key,
                                           {ACL_METADATA: acl.encode()},
                                           version_id=version_id(req))
    return empty_response(200, _version_headers(req))


# -- object ownership --------------------------------------------------------------------


async def get_bucket_ownership_controls(req: S3Request) -> Response:
    settings = await _settings(req)
    if settings.ownership is None:
        raise OwnershipControlsNotFoundError(resource=req.bucket)
    return xml_response("OwnershipControls", [
        f"<Rule>{el('ObjectOwnership', settings.ownership.value)}</Rule>"])


async def put_bucket_ownership_controls(req: S3Request) -> Response:
    root = parse(await req.read_document(), "OwnershipControls")
    rules = root.findall("Rule")
    if len(rules) != 1:
        raise MalformedXML("OwnershipControls needs exactly one Rule.")
    try:
        ownership = Ownership((text(rules[0], "ObjectOwnership", required=True) or "").strip())
    except ValueError:
        raise MalformedXML("ObjectOwnership must be BucketOwnerEnforced, "
                           "BucketOwnerPreferred or ObjectWriter.") from None

    def change(settings: BucketAccess) -> BucketAccess:
        if ownership is Ownership.BUCKET_OWNER_ENFORCED and not _owner_only(settings.acl):
            raise InvalidBucketAclWithObjectOwnership()
        return replace(settings, ownership=ownership)

    await _access(req).change_bucket(req.bucket, change)
    return empty_response(200)


async def delete_bucket_ownership_controls(req: S3Request) -> Response:
    await _access(req).change_bucket(req.bucket, lambda s: replace(s, ownership=None))
    return empty_response(204)


# -- public access block -----------------------------------------------------------------


async def get_public_access_block(req: S3Request) -> Response:
    settings = await _settings(req)
    block = settings.public_access_block
    if block is None:
        raise NoSuchPublicAccessBlockConfiguration(resource=req.bucket)
    return xml_response("PublicAccessBlockConfiguration", [
        el(name, str(value).lower()) for name, value in zip(PublicAccessBlock.FIELDS,
                                                            block.values(), strict=True)])


async def put_public_access_block(req: S3Request) -> Response:
    root = parse(await req.read_document(), "PublicAccessBlockConfiguration")
    values = []
    for name in PublicAccessBlock.FIELDS:
        raw = (text(root, name) or "false").strip().lower()
        if raw not in ("true", "false"):
            raise MalformedXML(f"{name} must be true or false.")
        values.append(raw == "true")
    block = PublicAccessBlock(*values)
    await _access(req).change_bucket(req.bucket,
                                     lambda s: replace(s, public_access_block=block))
    return empty_response(200)


async def delete_public_access_block(req: S3Request) -> Response:
    await _access(req).change_bucket(req.bucket,
                                     lambda s: replace(s, public_access_block=None))
    return empty_response(204)


HANDLERS = {
    "GetBucketAcl": get_bucket_acl,
    "PutBucketAcl": put_bucket_acl,
    "GetObjectAcl": get_object_acl,
    "PutObjectAcl": put_object_acl,
    "GetBucketOwnershipControls": get_bucket_ownership_controls,
    "PutBucketOwnershipControls": put_bucket_ownership_controls,
    "DeleteBucketOwnershipControls": delete_bucket_ownership_controls,
    "GetPublicAccessBlock": get_public_access_block,
    "PutPublicAccessBlock": put_public_access_block,
    "DeletePublicAccessBlock": delete_public_access_block,
}
