"""Where versions live in a backend: the current object and hidden version records.

* The **current** version of ``key`` is the ordinary object ``key``; its version is
  stamped in the reserved user-metadata entry ``squall-version-id`` (``<id>`` or
  ``null:<order id>``). An object without the stamp (written before versioning was
  enabled, or by another tool) is the null version, ordered by its modification time.
* Every **noncurrent** version and every **delete marker** is a version record: an
  object under the internal key ``record_base(key) + invert(order) + "." + kind +
  nullness`` (the record key layout is defined once, in :mod:`backends.core.internal_keys`,
  which the cluster ring reads too). Internal keys start with ``INTERNAL`` (U+007F),
  which clients may not use; a backend may keep them apart (the posix backend stores them
  in its hidden area). Records of one key are contiguous and sort newest first, and keys
  sort in the same order as the records' keys.

The layout is versioned by ``FORMAT`` (docs/versioning.md), written with a magic in the
bucket's status object (:mod:`gateway.versioning.state`); records also carry the stamp.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from backends.core.base import ObjectInfo, ObjectMeta
from backends.core.internal_keys import CONFIG_PREFIX, record_base, split_record
from backends.core.keys import INTERNAL_PREFIX as INTERNAL
from gateway.versioning import ids

FORMAT = 1
CONFIG_KEY = CONFIG_PREFIX + "versioning"
STAMP = "squall-version-id"
ETAG = "squall-version-etag"  # a version's own ETag, kept when its bytes are copied
_RESERVED = (STAMP, ETAG)


def is_internal(key: str) -> bool:
    return key.startswith(INTERNAL)


@dataclass(frozen=True, slots=True)
class Version:
    """One version of ``key``: where it is stored and what it is."""

    key: str
    order: str  # a version id; for a null version, when it was written
    null: bool
    marker: bool
    stored_key: str  # ``key`` for the current version, else its record key

    @property
    def version_id(self) -> str:
        return ids.NULL if self.null else self.order

    @property
    def is_current_object(self) -> bool:
        return self.stored_key == self.key


def record_key(key: str, order: str, *, null: bool, marker: bool) -> str:
    flags = ("m" if marker else "d") + ("n" if null else "v")
    return f"{record_base(key)}{ids.invert(order)}.{flags}"


def parse_record(stored_key: str) -> Version | None:
    """The Version a record key stands for; None for a key that is not a record."""
    parts = split_record(stored_key)
    if parts is None:
        return None
    key, suffix = parts
    inverted, dot, flags = suffix.partition(".")
    if not dot or len(flags) != 2 or not ids.is_version_id(inverted):
        return None
    if flags[0] not in "dm" or flags[1] not in "nv":
        return None
    return Version(key, ids.invert(inverted), flags[1] == "n", flags[0] == "m", stored_key)


def as_record(version: Version) -> Version:
    """The same version, stored as a record."""
    return replace(version, stored_key=record_key(version.key, version.order,
                                                  null=version.null, marker=version.marker))


def stamp(meta: ObjectMeta, order: str, *, null: bool, etag: str | None = None
          ) -> ObjectMeta:
    """``meta`` carrying the version stamp (and the version's ETag when its bytes are
    copied, since a copy may get another ETag)."""
    user = {k: v for k, v in meta.user.items() if k not in _RESERVED}
    user[STAMP] = f"{ids.NULL}:{order}" if null else order
    if etag is not None:
        user[ETAG] = etag
    return replace(meta, user=user)


def unstamped(meta: ObjectMeta) -> ObjectMeta:
    """``meta`` without the reserved entries, as clients see it."""
    if not any(name in meta.user for name in _RESERVED):
        return meta
    return replace(meta, user={k: v for k, v in meta.user.items() if k not in _RESERVED})


def version_etag(info: ObjectInfo) -> str:
    return info.meta.user.get(ETAG, info.etag)


def current_version(info: ObjectInfo) -> Version:
    """The Version of a current object (unstamped objects are the null version)."""
    value = info.meta.user.get(STAMP, "")
    null, _, order = value.rpartition(":")
    if ids.is_version_id(order) and null in ("", ids.NULL):
        return Version(info.key, order, bool(null), False, info.key)
    return Version(info.key, ids.at_time(info.last_modified), True, False, info.key)


def client_view(info: ObjectInfo, version: Version, *, versioned: bool) -> ObjectInfo:
    """``info`` as a client sees ``version``: its key, id, ETag, time and metadata
    without the stamp (a copied version's own mtime and ETag are not the version's)."""
    return replace(info, key=version.key, meta=unstamped(info.meta),
                   etag=version_etag(info), last_modified=ids.timestamp(version.order),
                   version_id=version.version_id if versioned else None)
