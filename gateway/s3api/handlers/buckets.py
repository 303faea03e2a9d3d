"""Service- and bucket-level operations: thin translations between HTTP and ObjectService."""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from collections.abc import Callable

from starlette.responses import Response

from backends.core.base import ObjectMeta
from backends.core.errors import BucketAlreadyOwnedByYou
from gateway.auth.access import request_origin
from gateway.auth.owners import ListingOwners
from gateway.auth.users import User
from gateway.protocol.errors import (
    AccessDenied,
    BucketAlreadyExists,
    InvalidArgument,
    MalformedXML,
    NotImplementedOperation,
    s3_error_for,
)
from gateway.protocol.listing import ListPage
from gateway.protocol.responses import empty_response, xml_response
from gateway.protocol.xml import INITIATOR, OWNER, el, esc, etag_el, iso8601, opt, parse, text
from gateway.s3api.context import S3Request
from gateway.s3api.handlers import acl
from gateway.s3api.headers import storage_class
from gateway.service.objects import DeleteResult
from gateway.versioning import VersioningStatus
from gateway.versioning.listing import VersionPage

MAX_DELETE_KEYS = 1000
#: where S3 keeps answering 200 to re-creating a bucket one owns
LEGACY_REGION = "us-east-1"
MAX_BUCKETS = 10_000


def owner(user: User | None) -> str:
    """``<Owner>`` naming ``user`` (its canonical id and name); OWNER without one."""
    if user is None:
        return OWNER
    return f"<Owner>{el('ID', user.canonical_id)}{el('DisplayName', user.name)}</Owner>"


def _encoder(req: S3Request) -> Callable[[str], str]:
    encoding = req.query.get("encoding-type")
    if encoding is None:
        return lambda value: value
    if encoding != "url":
        raise InvalidArgument("Invalid Encoding Method specified in Request")
    return lambda value: urllib.parse.quote(value, safe="/")


async def list_buckets(req: S3Request) -> Response:
    """ListBuckets, paginated (``max-buckets``, ``continuation-token``) and by ``prefix``."""
    prefix = req.query.get("prefix", "")
    paginated = "max-buckets" in req.query or "continuation-token" in req.query
    max_buckets = req.int_query("max-buckets", MAX_BUCKETS, low=1)
    if max_buckets > MAX_BUCKETS:
        raise InvalidArgument(f"Argument max-buckets must be an integer between 1 and "
                              f"{MAX_BUCKETS}")
    token = req.query.get("continuation-token")
    after = _decode_token(token) if token else ""
    if token is not None and not token:
        raise InvalidArgument("The continuation token provided is incorrect")
    region = req.query.get("bucket-region")
    buckets = [b for b in await req.service.list_buckets()
               if b.name.startswith(prefix) and b.name > after]
    if req.access is not None and req.user is not None and not req.user.admin:
        mine = await req.access.owned(req.user, [b.name for b in buckets])
        buckets = [b for b in buckets if b.name in mine]  # the admin sees every bucket
    if region is not None and region != req.auth.region:
        buckets = []
    page = buckets[:max_buckets]
    items = "".join(f"<Bucket>{el('Name', b.name)}{el('CreationDate', iso8601(b.created))}"
                    f"{el('BucketRegion', req.auth.region)}</Bucket>" for b in page)
    next_token = _encode_token(page[-1].name) if paginated and len(buckets) > len(page) \
        else None
    return xml_response("ListAllMyBucketsResult", [
        owner(req.user), f"<Buckets>{items}</Buckets>", opt("ContinuationToken", next_token),
        opt("Prefix", prefix if "prefix" in req.query else None)])


async def create_bucket(req: S3Request) -> Response:
    document = await req.read_document()
    if document.strip():
        parse(document, "CreateBucketConfiguration")  # validates; any region is served here
    if await acl.recreation_changes_acl(req):
        raise BucketAlreadyOwnedByYou(req.bucket)
    acl.check_bucket_acl_headers(req)
    try:
        await req.service.create_bucket(req.bucket)
    except BucketAlreadyOwnedByYou:
        if req.access is not None and req.user is not None and \
                (await req.access.bucket(req.bucket)).owner != req.user.canonical_id:
            raise BucketAlreadyExists(resource=req.bucket) from None
        if req.auth.region != LEGACY_REGION:
            raise
        # S3 in us-east-1 answers 200 to re-creating a bucket one owns (legacy).
        return empty_response(200, {"location": f"/{req.bucket}"})
    await acl.create_bucket_access(req)
    return empty_response(200, {"location": f"/{req.bucket}"})


async def head_bucket(req: S3Request) -> Response:
    await req.service.head_bucket(req.bucket)
    return empty_response(200, {"x-amz-bucket-region": req.auth.region})


async def delete_bucket(req: S3Request) -> Response:
    await req.service.delete_bucket(req.bucket)
    return empty_response(204)


async def get_bucket_location(req: S3Request) -> Response:
    await req.service.head_bucket(req.bucket)
    region = "" if req.auth.region == LEGACY_REGION else req.auth.region
    return xml_response("LocationConstraint", [esc(region)])


async def get_bucket_versioning(req: S3Request) -> Response:
    status = await req.service.get_bucket_versioning(req.bucket)
    return xml_response("VersioningConfiguration", [opt("Status", status.value or None)])


async def put_bucket_versioning(req: S3Request) -> Response:
    root = parse(await req.read_document(), "VersioningConfiguration")
    status = (text(root, "Status") or "").strip()
    mfa_delete = (text(root, "MfaDelete") or "").strip()
    if status not in ("Enabled", "Suspended") or mfa_delete not in ("", "Disabled",
                                                                     "Enabled"):
        raise MalformedXML("The versioning configuration needs a Status of Enabled or "
                           "Suspended.")
    if mfa_delete == "Enabled":
        raise NotImplementedOperation("MFA delete is not supported.")
    await req.service.put_bucket_versioning(req.bucket, VersioningStatus(status))
    return empty_response(200)


async def _owners(req: S3Request) -> ListingOwners | None:
    """The owners of the listed objects (None without access control: the gateway's)."""
    if req.access is None:
        return None
    return await req.access.listing_owners(req.bucket, req.bucket_access)


def _owner(owners: ListingOwners | None, meta: ObjectMeta, element: str = "Owner") -> str:
    if owners is None:
        return INITIATOR if element == "Initiator" else OWNER
    return owners.owner(meta.user, element)


def _version_entries(page: VersionPage, enc: Callable[[str], str],
                     owners: ListingOwners | None) -> str:
    out = []
    for entry in page.entries:
        o = entry.info
        common = (f"{el('Key', enc(o.key))}{el('VersionId', o.version_id or 'null')}"
                  f"{el('IsLatest', str(entry.is_latest).lower())}"
                  f"{el('LastModified', iso8601(o.last_modified))}")
        owner = _owner(owners, o.meta)
        if entry.delete_marker:
            out.append(f"<DeleteMarker>{common}{owner}</DeleteMarker>")
        else:
            out.append(f"<Version>{common}{etag_el(o.etag)}"
                       f"{el('Size', o.size)}{el('StorageClass', storage_class(o.meta))}"
                       f"{owner}</Version>")
    return "".join(out)


async def list_object_versions(req: S3Request) -> Response:
    enc = _encoder(req)
    prefix = req.query.get("prefix", "")
    delimiter = req.query.get("delimiter", "")
    key_marker = req.query.get("key-marker", "")
    version_id_marker = req.query.get("version-id-marker", "")
    if version_id_marker and not key_marker:
        raise InvalidArgument("A version-id marker cannot be specified without a key marker.")
    max_keys = req.int_query("max-keys", 1000, high=1000)
    page = await req.service.list_object_versions(
        req.bucket, prefix=prefix, delimiter=delimiter, max_keys=max_keys,
        key_marker=key_marker, version_id_marker=version_id_marker)
    parts = [el("Name", req.bucket), el("Prefix", enc(prefix)),
             el("KeyMarker", enc(key_marker)), el("VersionIdMarker", version_id_marker),
             opt("NextKeyMarker", enc(page.next_key_marker) if page.is_truncated and
                 page.next_key_marker else None),
             opt("NextVersionIdMarker", page.next_version_id_marker
                 if page.is_truncated else None),
             el("MaxKeys", max_keys), opt("Delimiter", enc(delimiter) if delimiter else None),
             el("IsTruncated", str(page.is_truncated).lower()),
             opt("EncodingType", req.query.get("encoding-type")),
             _version_entries(page, enc, await _owners(req)),
             "".join(f"<CommonPrefixes>{el('Prefix', enc(p))}</CommonPrefixes>"
                     for p in page.common_prefixes)]
    return xml_response("ListVersionsResult", parts)


def _contents(page: ListPage, enc: Callable[[str], str], fetch_owner: bool,
              owners: ListingOwners | None) -> str:
    return "".join(
        f"<Contents>{el('Key', enc(o.key))}{el('LastModified', iso8601(o.last_modified))}"
        f"{etag_el(o.etag)}{el('Size', o.size)}"
        f"{_owner(owners, o.meta) if fetch_owner else ''}"
        f"{el('StorageClass', storage_class(o.meta))}</Contents>" for o in page.objects)


def _prefixes(page: ListPage, enc: Callable[[str], str]) -> str:
    return "".join(f"<CommonPrefixes>{el('Prefix', enc(p))}</CommonPrefixes>"
                   for p in page.common_prefixes)


async def list_objects(req: S3Request) -> Response:
    enc = _encoder(req)
    prefix = req.query.get("prefix", "")
    delimiter = req.query.get("delimiter", "")
    marker = req.query.get("marker", "")
    max_keys = req.int_query("max-keys", 1000, high=1000)
    page = await req.service.list_objects(req.bucket, prefix=prefix, delimiter=delimiter,
                                          max_keys=max_keys, after=marker)
    next_marker = page.next_marker if page.is_truncated and delimiter else None
    parts = [el("Name", req.bucket), el("Prefix", enc(prefix)), el("Marker", enc(marker)),
             el("MaxKeys", max_keys), opt("Delimiter", enc(delimiter) if delimiter else None),
             el("IsTruncated", str(page.is_truncated).lower()),
             opt("NextMarker", enc(next_marker) if next_marker else None),
             opt("EncodingType", req.query.get("encoding-type")),
             _contents(page, enc, True, await _owners(req)), _prefixes(page, enc)]
    return xml_response("ListBucketResult", parts)


def _encode_token(after: str) -> str:
    return base64.urlsafe_b64encode(after.encode()).decode().rstrip("=")


def _decode_token(token: str) -> str:
    try:
        padded = token.encode() + b"=" * (-len(token) % 4)
        return base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidArgument("The continuation token provided is incorrect") from None


async def list_objects_v2(req: S3Request) -> Response:
    enc = _encoder(req)
    prefix = req.query.get("prefix", "")
    delimiter = req.query.get("delimiter", "")
    start_after = req.query.get("start-after", "")
    token = req.query.get("continuation-token")
    max_keys = req.int_query("max-keys", 1000, high=1000)
    # An empty token asks for the first page (S3 answers it, echoing the empty token).
    after = max(_decode_token(token) if token else "", start_after)
    fetch_owner = req.query.get("fetch-owner") == "true"
    page = await req.service.list_objects(req.bucket, prefix=prefix, delimiter=delimiter,
                                          max_keys=max_keys, after=after)
    next_token = (_encode_token(page.next_marker)
                  if page.is_truncated and page.next_marker else None)
    parts = [el("Name", req.bucket), el("Prefix", enc(prefix)),
             opt("Delimiter", enc(delimiter) if delimiter else None),
             el("MaxKeys", max_keys),
             el("KeyCount", len(page.objects) + len(page.common_prefixes)),
             el("IsTruncated", str(page.is_truncated).lower()),
             opt("ContinuationToken", token), opt("NextContinuationToken", next_token),
             opt("StartAfter", enc(start_after) if start_after else None),
             opt("EncodingType", req.query.get("encoding-type")),
             _contents(page, enc, fetch_owner, await _owners(req) if fetch_owner else None),
             _prefixes(page, enc)]
    return xml_response("ListBucketResult", parts)


async def list_multipart_uploads(req: S3Request) -> Response:
    enc = _encoder(req)
    prefix = req.query.get("prefix", "")
    delimiter = req.query.get("delimiter", "")
    key_marker = req.query.get("key-marker", "")
    id_marker = req.query.get("upload-id-marker", "") if key_marker else ""
    max_uploads = req.int_query("max-uploads", 1000, high=1000)
    page = await req.service.list_multipart_uploads(
        req.bucket, prefix=prefix, delimiter=delimiter, max_uploads=max_uploads,
        key_marker=key_marker, upload_id_marker=id_marker)
    owners = await _owners(req)
    uploads = "".join(
        f"<Upload>{el('Key', enc(u.key))}{el('UploadId', u.upload_id)}"
        f"{_owner(owners, u.meta, 'Initiator')}{_owner(owners, u.meta)}"
        f"<StorageClass>STANDARD</StorageClass>{el('Initiated', iso8601(u.initiated))}"
        "</Upload>" for u in page.uploads)
    prefixes = "".join(f"<CommonPrefixes>{el('Prefix', enc(p))}</CommonPrefixes>"
                       for p in page.common_prefixes)
    parts = [el("Bucket", req.bucket), el("KeyMarker", enc(key_marker)),
             el("UploadIdMarker", id_marker),
             opt("NextKeyMarker", enc(page.next_key_marker) if page.next_key_marker else None),
             opt("NextUploadIdMarker", page.next_upload_id_marker or None),
             el("Prefix", enc(prefix)), opt("Delimiter", enc(delimiter) if delimiter else None),
             el("MaxUploads", max_uploads), el("IsTruncated", str(page.is_truncated).lower()),
             opt("EncodingType", req.query.get("encoding-type")), uploads, prefixes]
    return xml_response("ListMultipartUploadsResult", parts)


async def _delete_allowed(req: S3Request, pairs: list[tuple[str, str | None]]
                          ) -> list[DeleteResult]:
    """Delete the keys the caller may delete; AccessDenied results for the others."""
    access, settings = req.access, req.bucket_access
    if access is None or settings is None:  # the admin, or no access control
        return await req.service.delete_objects(req.bucket, pairs)
    source_ip, secure = request_origin(req.request.scope)
    allowed = [await access.allows(req.user, "DeleteObject", req.bucket, key,
                                   version_id=version, settings=settings,
                                   source_ip=source_ip, secure=secure)
               for key, version in pairs]
    done = iter(await req.service.delete_objects(
        req.bucket, [pair for pair, ok in zip(pairs, allowed, strict=True) if ok]))
    return [next(done) if ok else DeleteResult(key, version, error=AccessDenied())
            for (key, version), ok in zip(pairs, allowed, strict=True)]


async def delete_objects(req: S3Request) -> Response:
    if "content-md5" not in req.headers and not any(
            h.startswith("x-amz-checksum-") or h == "x-amz-sdk-checksum-algorithm"
            for h in req.headers):
        raise InvalidArgument("Missing required header for this request: Content-MD5 or "
                              "x-amz-checksum-*")
    root = parse(await req.read_document(), "Delete")
    quiet = (text(root, "Quiet") or "").strip().lower() == "true"
    objects = root.findall("Object")
    if len(objects) > MAX_DELETE_KEYS:
        raise MalformedXML("The request may name at most 1000 keys.")
    pairs = [(text(o, "Key", required=True) or "", text(o, "VersionId")) for o in objects]
    results = await _delete_allowed(req, pairs)
    out = []
    for result in results:
        version = opt("VersionId", result.version_id)
        if result.error is None:
            if quiet:
                continue
            outcome = result.outcome
            marker = ""
            if outcome is not None and outcome.delete_marker:
                marker = (el("DeleteMarker", "true")
                          + el("DeleteMarkerVersionId", outcome.version_id or "null"))
            out.append(f"<Deleted>{el('Key', result.key)}{version}{marker}</Deleted>")
            continue
        spec, message = s3_error_for(result.error)
        out.append(f"<Error>{el('Key', result.key)}{version}{el('Code', spec.code)}"
                   f"{el('Message', message)}</Error>")
    return xml_response("DeleteResult", out)


HANDLERS = {
    "ListBuckets": list_buckets,
    "CreateBucket": create_bucket,
    "HeadBucket": head_bucket,
    "DeleteBucket": delete_bucket,
    "GetBucketLocation": get_bucket_location,
    "GetBucketVersioning": get_bucket_versioning,
    "PutBucketVersioning": put_bucket_versioning,
    "ListObjectVersions": list_object_versions,
    "ListObjects": list_objects,
    "ListObjectsV2": list_objects_v2,
    "ListMultipartUploads": list_multipart_uploads,
    "DeleteObjects": delete_objects,
}
