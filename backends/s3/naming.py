"""Where a Squall bucket and key live upstream.

* Direct mapping (default): Squall bucket ``b`` is the upstream bucket ``b``; keys unchanged.
* Shared mapping (``bucket=NAME``, optional ``prefix=P``): everything lives in the one
  upstream bucket NAME. Squall bucket ``b`` exists iff the empty marker object
  ``P + ".squall/buckets/" + b`` exists; its objects are the keys under ``P + b + "/"``.
  Bucket names never start with ``.`` nor contain ``/``, so no marker equals an object key
  or is a path prefix of one (or of another marker): stores that keep keys as a file tree
  (MinIO) cannot hold an object and a "directory" of the same name, and list only one.

  The first layout put the marker at ``P + b``, a path prefix of every key of ``b``
  (:meth:`Naming.legacy_marker`); :mod:`backends.s3.migration` moves such markers.

Internal keys (``INTERNAL_PREFIX``, e.g. version records) are stored upstream under
``INTERNAL_UPSTREAM`` instead, because some S3 services (Squall among them) refuse keys
that start with U+007F; client keys under that prefix are refused (InvalidKey).
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.core.errors import InvalidKey
from backends.core.keys import INTERNAL_PREFIX

INTERNAL_UPSTREAM = ".squall-internal/"
# Where the shared mapping keeps its bucket markers, after the configured prefix.
MARKERS = ".squall/buckets/"


@dataclass(frozen=True, slots=True)
class Location:
    """An upstream bucket and the key prefix holding one Squall bucket's objects."""

    bucket: str
    prefix: str

    def key(self, key: str) -> str:
        """The upstream key of a Squall key (InvalidKey for a reserved one)."""
        if key.startswith(INTERNAL_PREFIX):
            return self.prefix + INTERNAL_UPSTREAM + key[len(INTERNAL_PREFIX):]
        if key.startswith(INTERNAL_UPSTREAM) or key == INTERNAL_UPSTREAM[:-1]:
            # The bare name too: an object there would be a path prefix of internal keys.
            raise InvalidKey(f"Keys starting with {INTERNAL_UPSTREAM!r} are reserved by "
                             "this backend.", resource=key)
        return self.prefix + key

    def list_position(self, key: str, prefix: str) -> str:
        """The upstream form of a listing's prefix or start key: internal keys are mapped
        only in a listing of internal keys (elsewhere they are bounds in Squall's order,
        which is the upstream order of client keys)."""
        if prefix.startswith(INTERNAL_PREFIX):
            return self.key(key)
        return self.prefix + key

    def squall_key(self, upstream_key: str) -> str:
        key = upstream_key[len(self.prefix):]
        if key.startswith(INTERNAL_UPSTREAM):
            return INTERNAL_PREFIX + key[len(INTERNAL_UPSTREAM):]
        return key


@dataclass(frozen=True, slots=True)
class Naming:
    """The bucket mapping chosen by configuration."""

    shared_bucket: str | None = None
    prefix: str = ""

    @property
    def shared(self) -> bool:
        return self.shared_bucket is not None

    def locate(self, bucket: str) -> Location:
        if self.shared_bucket is None:
            return Location(bucket, "")
        return Location(self.shared_bucket, f"{self.prefix}{bucket}/")

    @property
    def markers(self) -> str:
        """Shared mode: the upstream prefix of every bucket marker."""
        return f"{self.prefix}{MARKERS}"

    def marker(self, bucket: str) -> str:
        """Shared mode: the key of the object that says bucket ``bucket`` exists."""
        return f"{self.markers}{bucket}"

    def bucket_of_marker(self, upstream_key: str) -> str | None:
        """The Squall bucket a listed upstream key is the marker of, or None."""
        if not upstream_key.startswith(self.markers):
            return None
        name = upstream_key[len(self.markers):]
        return name if name and "/" not in name else None

    def legacy_marker(self, bucket: str) -> str:
        """Shared mode: where the first layout kept ``bucket``'s marker (``P + b``)."""
        return f"{self.prefix}{bucket}"

    def bucket_of_legacy_marker(self, upstream_key: str) -> str | None:
        """The Squall bucket a key directly under the prefix was the old marker of, or None
        (bucket names never start with ``.``: that excludes this backend's own entries)."""
        if not upstream_key.startswith(self.prefix):
            return None
        name = upstream_key[len(self.prefix):]
        return name if name and "/" not in name and not name.startswith(".") else None
