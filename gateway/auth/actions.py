"""What each S3 operation asks for: its AWS action name and the ACL permission it needs.

One table, keyed by the operation names of :mod:`gateway.s3api.routing`; a test checks
that every routed operation has an entry. ``permission`` None means that no ACL grant
allows the operation: only the owner (of the bucket, or of the object for object-level
entries) and a bucket policy may.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum


class Permission(Enum):
    """ACL permissions (S3's names)."""

    READ = "READ"
    WRITE = "WRITE"
    READ_ACP = "READ_ACP"
    WRITE_ACP = "WRITE_ACP"
    FULL_CONTROL = "FULL_CONTROL"


class Scope(Enum):
    """Which resource's owner and ACL decide."""

    SERVICE = "service"  # no bucket: ListBuckets, CreateBucket, preflights
    BUCKET = "bucket"
    OBJECT = "object"


@dataclass(frozen=True, slots=True)
class Action:
    name: str  # the AWS action, "s3:GetObject"
    scope: Scope
    permission: Permission | None
    versioned: str | None = None  # the action named when the request has ?versionId

    def action_for(self, query: Mapping[str, str]) -> str:
        return self.versioned if self.versioned is not None and "versionId" in query \
            else self.name


_R, _W = Permission.READ, Permission.WRITE
_RA, _WA = Permission.READ_ACP, Permission.WRITE_ACP
_S, _B, _O = Scope.SERVICE, Scope.BUCKET, Scope.OBJECT

ACTIONS: Mapping[str, Action] = {
    "PreflightRequest": Action("", _S, None),
    "ListBuckets": Action("s3:ListAllMyBuckets", _S, None),
    "CreateBucket": Action("s3:CreateBucket", _S, None),
    "HeadBucket": Action("s3:ListBucket", _B, _R),
    "DeleteBucket": Action("s3:DeleteBucket", _B, None),
    "ListObjects": Action("s3:ListBucket", _B, _R),
    "ListObjectsV2": Action("s3:ListBucket", _B, _R),
    "ListObjectVersions": Action("s3:ListBucketVersions", _B, _R),
    "ListMultipartUploads": Action("s3:ListBucketMultipartUploads", _B, _R),
    "GetBucketLocation": Action("s3:GetBucketLocation", _B, None),
    "GetBucketVersioning": Action("s3:GetBucketVersioning", _B, None),
    "PutBucketVersioning": Action("s3:PutBucketVersioning", _B, None),
    "DeleteObjects": Action("s3:DeleteObject", _B, _W),
    "PutBucketCors": Action("s3:PutBucketCORS", _B, None),
    "GetBucketCors": Action("s3:GetBucketCORS", _B, None),
    "DeleteBucketCors": Action("s3:PutBucketCORS", _B, None),
    "PutBucketTagging": Action("s3:PutBucketTagging", _B, None),
    "GetBucketTagging": Action("s3:GetBucketTagging", _B, None),
    "DeleteBucketTagging": Action("s3:PutBucketTagging", _B, None),
    "PutBucketLifecycleConfiguration": Action("s3:PutLifecycleConfiguration", _B, None),
    "GetBucketLifecycleConfiguration": Action("s3:GetLifecycleConfiguration", _B, None),
    "DeleteBucketLifecycle": Action("s3:PutLifecycleConfiguration", _B, None),
    "GetBucketAcl": Action("s3:GetBucketAcl", _B, _RA),
    "PutBucketAcl": Action("s3:PutBucketAcl", _B, _WA),
    "GetBucketOwnershipControls": Action("s3:GetBucketOwnershipControls", _B, None),
    "PutBucketOwnershipControls": Action("s3:PutBucketOwnershipControls", _B, None),
    "DeleteBucketOwnershipControls": Action("s3:PutBucketOwnershipControls", _B, None),
    "GetPublicAccessBlock": Action("s3:GetBucketPublicAccessBlock", _B, None),
    "PutPublicAccessBlock": Action("s3:PutBucketPublicAccessBlock", _B, None),
    "DeletePublicAccessBlock": Action("s3:PutBucketPublicAccessBlock", _B, None),
    "GetBucketPolicy": Action("s3:GetBucketPolicy", _B, None),
    "PutBucketPolicy": Action("s3:PutBucketPolicy", _B, None),
    "DeleteBucketPolicy": Action("s3:DeleteBucketPolicy", _B, None),
    "GetBucketPolicyStatus": Action("s3:GetBucketPolicyStatus", _B, None),
    # Writes need WRITE on the bucket, whoever owns the object they replace.
    "PutObject": Action("s3:PutObject", _B, _W),
    "PostObject": Action("s3:PutObject", _B, _W),
    "CopyObject": Action("s3:PutObject", _B, _W),
    "CreateMultipartUpload": Action("s3:PutObject", _B, _W),
    "UploadPart": Action("s3:PutObject", _B, _W),
    "UploadPartCopy": Action("s3:PutObject", _B, _W),
    "CompleteMultipartUpload": Action("s3:PutObject", _B, _W),
    "AbortMultipartUpload": Action("s3:AbortMultipartUpload", _B, _W),
    "ListParts": Action("s3:ListMultipartUploadParts", _B, _R),
    "DeleteObject": Action("s3:DeleteObject", _B, _W, "s3:DeleteObjectVersion"),
    # Reads are decided by the object's own ACL.
    "GetObject": Action("s3:GetObject", _O, _R, "s3:GetObjectVersion"),
    "HeadObject": Action("s3:GetObject", _O, _R, "s3:GetObjectVersion"),
    "GetObjectAttributes": Action("s3:GetObjectAttributes", _O, _R,
                                  "s3:GetObjectVersionAttributes"),
    "GetObjectAcl": Action("s3:GetObjectAcl", _O, _RA, "s3:GetObjectVersionAcl"),
    "PutObjectAcl": Action("s3:PutObjectAcl", _O, _WA, "s3:PutObjectVersionAcl"),
    "GetObjectTagging": Action("s3:GetObjectTagging", _O, None, "s3:GetObjectVersionTagging"),
    "PutObjectTagging": Action("s3:PutObjectTagging", _O, None, "s3:PutObjectVersionTagging"),
    "DeleteObjectTagging": Action("s3:DeleteObjectTagging", _O, None,
                                  "s3:DeleteObjectVersionTagging"),
}
