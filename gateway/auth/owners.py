"""The ``Owner`` (and ``Initiator``) elements of object, version and upload listings.

Listings already carry each object's user metadata (versioning reads it from the same
entries), so the owner comes from the object's ``squall-acl`` entry at no extra read: with
ACLs disabled (BucketOwnerEnforced) every object is the bucket owner's, as S3 answers;
with ACLs enabled the entry names the owner, and an object without one is the bucket
owner's. Each distinct entry is decoded once per listing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping

from gateway.auth.acl import ACL_METADATA, Acl, owner_xml
from gateway.auth.bucket_access import BucketAccess


class ListingOwners:
    """``<Owner>`` of each listed object of one bucket, for one response."""

    def __init__(self, settings: BucketAccess, name_of: Callable[[str], str | None]) -> None:
        self._settings = settings
        self._name_of = name_of
        self._by_raw: dict[str | None, str] = {}
        self._xml: dict[str, str] = {}

    def owner_id(self, user_meta: Mapping[str, str]) -> str:
        """The canonical id of the owner of an object with this user metadata."""
        settings = self._settings
        if not settings.acls_enabled:
            return settings.owner
        raw = user_meta.get(ACL_METADATA)
        known = self._by_raw.get(raw)
        if known is not None:
            return known
        owner = settings.owner
        if raw is not None:
            # A damaged entry stays the bucket owner's, as authorization reads it.
            with contextlib.suppress(ValueError, KeyError, TypeError):
                owner = Acl.decode(raw).owner
        self._by_raw[raw] = owner
        return owner

    def owner(self, user_meta: Mapping[str, str], element: str = "Owner") -> str:
        """``<Owner>`` (or ``element``) of an object with this user metadata."""
        return self.element(self.owner_id(user_meta), element)

    def element(self, canonical_id: str, element: str = "Owner") -> str:
        """``<Owner>`` (or ``element``) naming ``canonical_id`` and its user's name."""
        key = f"{element}\0{canonical_id}"
        xml = self._xml.get(key)
        if xml is None:
            xml = owner_xml(canonical_id, self._name_of)
            if element != "Owner":
                xml = f"<{element}>{xml[len('<Owner>'):-len('</Owner>')]}</{element}>"
            self._xml[key] = xml
        return xml
