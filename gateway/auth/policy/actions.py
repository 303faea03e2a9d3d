"""The S3 actions a bucket policy may name, and the kind of resource each applies to
(the bucket ``arn:aws:s3:::bucket`` or its objects ``arn:aws:s3:::bucket/key``), after
the Service Authorization Reference for Amazon S3."""

from __future__ import annotations

from enum import Enum


class Kind(Enum):
    BUCKET = "bucket"
    OBJECT = "object"


_OBJECT = """
AbortMultipartUpload BypassGovernanceRetention DeleteObject DeleteObjectTagging
DeleteObjectVersion DeleteObjectVersionTagging GetObject GetObjectAcl GetObjectAttributes
GetObjectLegalHold GetObjectRetention GetObjectTagging GetObjectTorrent GetObjectVersion
GetObjectVersionAcl GetObjectVersionAttributes GetObjectVersionForReplication
GetObjectVersionTagging GetObjectVersionTorrent InitiateReplication ListMultipartUploadParts
ObjectOwnerOverrideToBucketOwner PutObject PutObjectAcl PutObjectLegalHold
PutObjectRetention PutObjectTagging PutObjectVersionAcl PutObjectVersionTagging
ReplicateDelete ReplicateObject ReplicateTags RestoreObject
"""

_BUCKET = """
CreateBucket DeleteBucket DeleteBucketOwnershipControls DeleteBucketPolicy
DeleteBucketWebsite GetAccelerateConfiguration GetAnalyticsConfiguration GetBucketAcl
GetBucketCORS GetBucketLocation GetBucketLogging GetBucketNotification
GetBucketObjectLockConfiguration GetBucketOwnershipControls GetBucketPolicy
GetBucketPolicyStatus GetBucketPublicAccessBlock GetBucketRequestPayment GetBucketTagging
GetBucketVersioning GetBucketWebsite GetEncryptionConfiguration
GetIntelligentTieringConfiguration GetInventoryConfiguration GetLifecycleConfiguration
GetMetricsConfiguration GetReplicationConfiguration ListBucket ListBucketMultipartUploads
ListBucketVersions PutAccelerateConfiguration PutAnalyticsConfiguration PutBucketAcl
PutBucketCORS PutBucketLogging PutBucketNotification PutBucketObjectLockConfiguration
PutBucketOwnershipControls PutBucketPolicy PutBucketPublicAccessBlock
PutBucketRequestPayment PutBucketTagging PutBucketVersioning PutBucketWebsite
PutEncryptionConfiguration PutIntelligentTieringConfiguration PutInventoryConfiguration
PutLifecycleConfiguration PutMetricsConfiguration PutReplicationConfiguration
"""

#: lowercase ``s3:name`` -> the kind of resource it applies to
ACTIONS: dict[str, Kind] = {
    **{f"s3:{name.lower()}": Kind.OBJECT for name in _OBJECT.split()},
    **{f"s3:{name.lower()}": Kind.BUCKET for name in _BUCKET.split()},
}
