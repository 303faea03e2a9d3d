"""A bucket's owner, ACL, object ownership setting and public access block: one small
document (``access``) kept with the bucket's other configuration documents
(:mod:`gateway.service.bucket_config`) and cached as briefly as they are.

A bucket without the document was created before buckets had owners: the admin owns it,
its ACL is private, it has no ownership controls (objects belong to their writers, as
S3's ObjectWriter) and no public access block.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from gateway.auth.acl import Acl, private
from gateway.protocol.errors import AccessDenied
from gateway.service.bucket_config import BucketConfigs

DOCUMENT = "access"


class Ownership(Enum):
    """S3 Object Ownership."""

    BUCKET_OWNER_ENFORCED = "BucketOwnerEnforced"  # ACLs disabled
    BUCKET_OWNER_PREFERRED = "BucketOwnerPreferred"
    OBJECT_WRITER = "ObjectWriter"


@dataclass(frozen=True, slots=True)
class PublicAccessBlock:
    block_public_acls: bool = False
    ignore_public_acls: bool = False
    block_public_policy: bool = False
    restrict_public_buckets: bool = False

    FIELDS = ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy",
              "RestrictPublicBuckets")

    def values(self) -> tuple[bool, bool, bool, bool]:
        return (self.block_public_acls, self.ignore_public_acls, self.block_public_policy,
                self.restrict_public_buckets)


NO_BLOCK = PublicAccessBlock()
BLOCK_ALL = PublicAccessBlock(True, True, True, True)


@dataclass(frozen=True, slots=True)
class BucketAccess:
    acl: Acl
    ownership: Ownership | None = None  # None: no ownership controls
    public_access_block: PublicAccessBlock | None = None  # None: none configured

    @property
    def owner(self) -> str:
        return self.acl.owner

    @property
    def acls_enabled(self) -> bool:
        return self.ownership is not Ownership.BUCKET_OWNER_ENFORCED

    @property
    def block(self) -> PublicAccessBlock:
        """The public access block in force (nothing blocked when none is configured)."""
        return self.public_access_block or NO_BLOCK

    def to_json(self) -> dict[str, Any]:
        pab = self.public_access_block
        return {"acl": self.acl.to_json(),
                "ownership": None if self.ownership is None else self.ownership.value,
                "pab": None if pab is None else list(pab.values())}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> BucketAccess:
        ownership = doc.get("ownership")
        pab = doc.get("pab")
        return cls(Acl.from_json(doc["acl"]),
                   None if ownership is None else Ownership(ownership),
                   None if pab is None else PublicAccessBlock(*(bool(v) for v in pab)))


@dataclass(frozen=True, slots=True)
class NewBucketDefaults:
    """What a new bucket gets when its CreateBucket does not choose: the Object Ownership
    (settings ``default_object_ownership``) and the public access block
    (``default_public_access_block``). The default is S3's since April 2023: ACLs
    disabled, every public access block setting on."""

    ownership: Ownership = Ownership.BUCKET_OWNER_ENFORCED
    public_access_block: PublicAccessBlock | None = BLOCK_ALL

    @classmethod
    def from_settings(cls, ownership: str, public_access_block: str) -> NewBucketDefaults:
        """``ownership``: an :class:`Ownership` value; ``public_access_block``: ``all``,
        ``none`` or ``auto`` (all with BucketOwnerEnforced; none with ACLs enabled, as
        buckets made before 2023 had)."""
        chosen = Ownership(ownership)
        block = public_access_block == "all" or (
            public_access_block == "auto" and chosen is Ownership.BUCKET_OWNER_ENFORCED)
        return cls(chosen, BLOCK_ALL if block else None)


#: S3's defaults since April 2023 (the gateway's unless its settings choose others)
S3_DEFAULTS = NewBucketDefaults()


def new_bucket(owner: str, ownership: Ownership | None,
               defaults: NewBucketDefaults = S3_DEFAULTS) -> BucketAccess:
    """What a bucket created now gets: ``defaults`` (S3's since April 2023 unless the
    gateway's settings say otherwise), with the ownership setting the request chose, if
    any."""
    return BucketAccess(private(owner), ownership or defaults.ownership,
                        defaults.public_access_block)


async def load(configs: BucketConfigs, bucket: str, admin_id: str) -> BucketAccess:
    """The bucket's access settings (cached briefly); NoSuchBucket if there is no bucket."""
    doc = await configs.get(bucket, DOCUMENT)
    if doc is None:
        return BucketAccess(private(admin_id))
    return BucketAccess.from_json(doc)


async def refuse_public_policy(configs: BucketConfigs, bucket: str, is_public: bool) -> None:
    """AccessDenied when a public policy is put on a bucket whose public access block has
    BlockPublicPolicy (called by PutBucketPolicy)."""
    if not is_public:
        return
    doc = await configs.get(bucket, DOCUMENT)
    if doc is not None and BucketAccess.from_json(doc).block.block_public_policy:
        raise AccessDenied("Access Denied: the bucket's public access block has "
                           "BlockPublicPolicy set.")
