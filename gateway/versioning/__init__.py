"""S3 versioning, implemented once above the cache tier for every backend.

See docs/versioning.md for the semantics and the stored format.
"""

from gateway.versioning.objects import VersionedObjects
from gateway.versioning.state import VersioningStatus

__all__ = ["VersionedObjects", "VersioningStatus"]
