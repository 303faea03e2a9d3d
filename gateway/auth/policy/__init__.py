"""Bucket policies: the commonly used subset of the IAM policy language, parsed once per
stored document and evaluated with AWS's order (an explicit Deny, then an Allow, else no
decision: the caller's default deny). docs/security.md, "Bucket policies"."""

from __future__ import annotations

from backends.core.errors import BackendError
from gateway.auth.policy.model import BucketPolicy, Decision, PolicyRequest
from gateway.auth.policy.parse import MAX_POLICY_SIZE, parse_policy
from gateway.protocol.errors import MalformedPolicy
from gateway.service.bucket_config import BucketConfigs

__all__ = ["MAX_POLICY_SIZE", "POLICY", "BucketPolicy", "Decision", "MalformedPolicy",
           "PolicyRequest", "bucket_policy", "parse_policy"]

POLICY = "policy"  # the name of the bucket configuration document


async def bucket_policy(configs: BucketConfigs, bucket: str) -> BucketPolicy | None:
    """The policy of ``bucket``, None if it has none; parsed once per cached document
    (a stored document is the policy text as it was sent). A stored policy that no
    longer parses is a BackendError: requests fail closed, the admin can replace it."""
    def parse(text: str) -> BucketPolicy:
        try:
            return parse_policy(text.encode(), bucket)
        except MalformedPolicy as exc:
            raise BackendError(f"The policy of bucket {bucket} cannot be read: "
                               f"{exc.message}") from exc

    return await configs.get_parsed(bucket, POLICY, parse)
