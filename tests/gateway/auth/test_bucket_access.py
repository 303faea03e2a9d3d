"""What a new bucket gets (gateway/auth/bucket_access.py): S3's defaults, or the
gateway's settings ``default_object_ownership`` and ``default_public_access_block``."""

from __future__ import annotations

import pytest

from gateway.auth.bucket_access import (
    BLOCK_ALL,
    S3_DEFAULTS,
    NewBucketDefaults,
    Ownership,
    new_bucket,
)
from gateway.config.settings import load_settings
from gateway.config.sources import SettingsError


def test_s3s_defaults_since_2023() -> None:
    settings = load_settings()
    defaults = NewBucketDefaults.from_settings(settings.default_object_ownership,
                                               settings.default_public_access_block)
    assert defaults == S3_DEFAULTS
    made = new_bucket("owner", None, defaults)
    assert made.ownership is Ownership.BUCKET_OWNER_ENFORCED
    assert not made.acls_enabled
    assert made.public_access_block == BLOCK_ALL


@pytest.mark.parametrize(("ownership", "block", "blocked"), [
    ("BucketOwnerEnforced", "auto", True),
    ("ObjectWriter", "auto", False),
    ("BucketOwnerPreferred", "auto", False),
    ("ObjectWriter", "all", True),
    ("BucketOwnerEnforced", "none", False),
])
def test_the_public_access_block_follows_or_is_chosen(ownership: str, block: str,
                                                      blocked: bool) -> None:
    defaults = NewBucketDefaults.from_settings(ownership, block)
    made = new_bucket("owner", None, defaults)
    assert made.ownership is Ownership(ownership)
    assert made.public_access_block == (BLOCK_ALL if blocked else None)
    # A CreateBucket that chooses its ownership keeps the default block.
    chosen = new_bucket("owner", Ownership.BUCKET_OWNER_ENFORCED, defaults)
    assert chosen.ownership is Ownership.BUCKET_OWNER_ENFORCED
    assert chosen.public_access_block == made.public_access_block


def test_settings_refuse_other_values() -> None:
    with pytest.raises(SettingsError, match="default-object-ownership"):
        load_settings(default_object_ownership="Owner")
    with pytest.raises(SettingsError, match="default-public-access-block"):
        load_settings(default_public_access_block="some")
