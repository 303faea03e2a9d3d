"""Key operations that run on the key's owner, asked for by another member.

A key's writes (and the versioning logic of each: archiving the current object, writing
a marker, promoting a record) run where its lock lives, on its owner. Single-key S3
requests get there by forwarding (:mod:`gateway.cluster.forward`); a request naming
several keys, DeleteObjects, is split by owner by the member that received it, and each
owner deletes its keys (``POST /_squall/peer/delete-objects``). See docs/cluster.md,
"Which member runs what".

Imported by the gateway core (``gateway.service.objects``): standard library, backends and
versioning only (the wire format of these calls is in :mod:`gateway.cluster.wire`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from backends.core.errors import StorageError
from gateway.versioning.objects import DeleteOutcome

#: (key, version id or None), as a DeleteObjects request names an object.
DeleteItem = tuple[str, str | None]
#: What deleting one item gave: its outcome, or the error it met.
DeleteAnswer = DeleteOutcome | StorageError
#: At most as many items as one DeleteObjects request names.
MAX_DELETE_ITEMS = 1000


class KeyOperations(Protocol):
    """What an owner runs for the keys it owns when another member asks (the gateway
    core: ``ObjectService``)."""

    async def delete_object(self, bucket: str, key: str, *,
                            version_id: str | None = None) -> DeleteOutcome: ...


@runtime_checkable
class KeyOwners(Protocol):
    """A storage stack whose keys have owners, some of them other processes (a cluster
    member's ``ClusterBackend``)."""

    def key_owner(self, bucket: str, key: str) -> int | None:
        """The member owning ``key``, None if this process does."""
        ...

    async def delete_objects_at(self, owner: int, bucket: str,
                                items: Sequence[DeleteItem]) -> list[DeleteAnswer]:
        """Delete ``items`` (all owned by ``owner``) on their owner, one answer per item in
        order; a member that cannot be asked raises (MemberUnavailable)."""
        ...

    def serve_key_operations(self, operations: KeyOperations) -> None:
        """Run the other members' requests for this process's keys with ``operations``."""
        ...
