"""Cluster errors; each maps through the one S3 table by its base class."""

from __future__ import annotations

from backends.core.errors import ServiceUnavailable
from gateway.protocol.errors import AccessDenied


class MemberUnavailable(ServiceUnavailable):
    """A cluster member is unreachable; the keys it owns are unavailable until it returns
    (or, with a coordinator, until its lease ends and another member takes them over)."""

    def __init__(self, member: str, reason: str) -> None:
        super().__init__(f"cluster member {member} is unavailable ({reason}): the keys it "
                         "owns, and listings that must include them, are unavailable until "
                         "it returns or another member takes them over; other keys are "
                         "served normally.", resource=member)
        self.member = member
        self.reason = reason


class RingMismatch(ServiceUnavailable):
    """Cluster members were started with different member lists."""


class PeerAuthFailed(AccessDenied):
    """The cluster peer signature is missing, malformed, expired, replayed or wrong."""


class ViewChanged(ServiceUnavailable):
    """A member answered under a newer membership view than the caller's: the caller
    catches up and asks again."""

    def __init__(self, message: str = "", *, resource: str = "", revision: int = 0) -> None:
        super().__init__(message or "the cluster's membership changed meanwhile",
                         resource=resource)
        self.revision = revision
