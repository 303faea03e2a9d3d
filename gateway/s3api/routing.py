"""S3 routing as a table: method x level x sub-resource -> operation name.

The operation name is reused for metrics, logs and handler lookup.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.protocol.errors import MethodNotAllowed, NotImplementedOperation
from gateway.protocol.targets import Level

# Sub-resources checked in this order; "" means none of them is present.
_BUCKET_SUBRESOURCES = ("uploads", "delete", "location", "versioning", "tagging", "versions",
                        "acl", "policyStatus", "policy", "cors", "lifecycle", "encryption", "replication",
                        "website", "logging", "notification", "ownershipControls",
                        "publicAccessBlock", "object-lock", "accelerate", "requestPayment",
                        "analytics", "inventory", "metrics", "intelligent-tiering")
_OBJECT_SUBRESOURCES = ("uploadId", "uploads", "tagging", "acl", "retention", "legal-hold",
                        "torrent", "restore", "select", "attributes")

ROUTES: Mapping[tuple[str, Level, str], str] = {
    ("GET", Level.SERVICE, ""): "ListBuckets",
    ("PUT", Level.BUCKET, ""): "CreateBucket",
    ("HEAD", Level.BUCKET, ""): "HeadBucket",
    ("DELETE", Level.BUCKET, ""): "DeleteBucket",
    ("GET", Level.BUCKET, ""): "ListObjects",
    ("GET", Level.BUCKET, "location"): "GetBucketLocation",
    ("GET", Level.BUCKET, "versioning"): "GetBucketVersioning",
    ("PUT", Level.BUCKET, "versioning"): "PutBucketVersioning",
    ("GET", Level.BUCKET, "versions"): "ListObjectVersions",
    ("GET", Level.BUCKET, "uploads"): "ListMultipartUploads",
    ("POST", Level.BUCKET, "delete"): "DeleteObjects",
    ("POST", Level.BUCKET, ""): "PostObject",  # a browser upload (an HTML form)
    ("PUT", Level.BUCKET, "cors"): "PutBucketCors",
    ("GET", Level.BUCKET, "cors"): "GetBucketCors",
    ("DELETE", Level.BUCKET, "cors"): "DeleteBucketCors",
    ("PUT", Level.BUCKET, "tagging"): "PutBucketTagging",
    ("GET", Level.BUCKET, "tagging"): "GetBucketTagging",
    ("DELETE", Level.BUCKET, "tagging"): "DeleteBucketTagging",
    ("PUT", Level.BUCKET, "lifecycle"): "PutBucketLifecycleConfiguration",
    ("GET", Level.BUCKET, "lifecycle"): "GetBucketLifecycleConfiguration",
    ("DELETE", Level.BUCKET, "lifecycle"): "DeleteBucketLifecycle",
    ("PUT", Level.BUCKET, "policy"): "PutBucketPolicy",
    ("GET", Level.BUCKET, "policy"): "GetBucketPolicy",
    ("DELETE", Level.BUCKET, "policy"): "DeleteBucketPolicy",
    ("GET", Level.BUCKET, "policyStatus"): "GetBucketPolicyStatus",
    ("PUT", Level.OBJECT, ""): "PutObject",
    ("GET", Level.OBJECT, ""): "GetObject",
    ("HEAD", Level.OBJECT, ""): "HeadObject",
    ("DELETE", Level.OBJECT, ""): "DeleteObject",
    ("POST", Level.OBJECT, "uploads"): "CreateMultipartUpload",
    ("PUT", Level.OBJECT, "uploadId"): "UploadPart",
    ("POST", Level.OBJECT, "uploadId"): "CompleteMultipartUpload",
    ("DELETE", Level.OBJECT, "uploadId"): "AbortMultipartUpload",
    ("GET", Level.OBJECT, "uploadId"): "ListParts",
    ("GET", Level.OBJECT, "tagging"): "GetObjectTagging",
    ("PUT", Level.OBJECT, "tagging"): "PutObjectTagging",
    ("DELETE", Level.OBJECT, "tagging"): "DeleteObjectTagging",
    ("GET", Level.OBJECT, "attributes"): "GetObjectAttributes",
    ("GET", Level.BUCKET, "acl"): "GetBucketAcl",
    ("PUT", Level.BUCKET, "acl"): "PutBucketAcl",
    ("GET", Level.OBJECT, "acl"): "GetObjectAcl",
    ("PUT", Level.OBJECT, "acl"): "PutObjectAcl",
    ("GET", Level.BUCKET, "ownershipControls"): "GetBucketOwnershipControls",
    ("PUT", Level.BUCKET, "ownershipControls"): "PutBucketOwnershipControls",
    ("DELETE", Level.BUCKET, "ownershipControls"): "DeleteBucketOwnershipControls",
    ("GET", Level.BUCKET, "publicAccessBlock"): "GetPublicAccessBlock",
    ("PUT", Level.BUCKET, "publicAccessBlock"): "PutPublicAccessBlock",
    ("DELETE", Level.BUCKET, "publicAccessBlock"): "DeletePublicAccessBlock",
}

# Operations that are variants of a route, chosen by a header or query value.
_VARIANTS = {
    ("ListObjects", "list-type=2"): "ListObjectsV2",
    ("PutObject", "x-amz-copy-source"): "CopyObject",
    ("UploadPart", "x-amz-copy-source"): "UploadPartCopy",
}


def route(method: str, level: Level, query: Mapping[str, str],
          headers: Mapping[str, str]) -> str:
    """The operation for a request, or MethodNotAllowed / NotImplemented."""
    if method == "OPTIONS" and level is not Level.SERVICE:
        return "PreflightRequest"  # CORS, whatever the sub-resource
    names = _BUCKET_SUBRESOURCES if level is Level.BUCKET else _OBJECT_SUBRESOURCES
    sub = "" if level is Level.SERVICE else next((n for n in names if n in query), "")
    op = ROUTES.get((method, level, sub))
    if op is None:
        if sub and not any(lvl is level and name == sub for _, lvl, name in ROUTES):
            raise NotImplementedOperation(
                f"{method} on the {sub or level.value} sub-resource is not implemented.")
        raise MethodNotAllowed()
    if op == "ListObjects" and query.get("list-type") == "2":
        return _VARIANTS[(op, "list-type=2")]
    if "x-amz-copy-source" in headers and (op, "x-amz-copy-source") in _VARIANTS:
        return _VARIANTS[(op, "x-amz-copy-source")]
    return op
