"""Cluster errors; each maps through the one S3 table by its base class."""

from __future__ import annotations

from backends.errors import ServiceUnavailable
from gateway.s3api.errors import AccessDenied


class MemberUnavailable(ServiceUnavailable):
    """A cluster member is unreachable; the keys it owns are unavailable until it returns."""

    def __init__(self, node_id: int, url: str, reason: str) -> None:
        super().__init__(f"cluster member {node_id} ({url}) is unavailable ({reason}): "
                         "the keys it owns, and listings that must include them, are "
                         "unavailable until it returns; other keys are served normally.",
                         resource=url)
        self.node_id = node_id
        self.url = url
        self.reason = reason


class RingMismatch(ServiceUnavailable):
    """Cluster members were started with different member lists."""


class PeerAuthFailed(AccessDenied):
    """The cluster peer signature is missing, malformed, expired, replayed or wrong."""
