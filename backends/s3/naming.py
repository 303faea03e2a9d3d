"""Where a Squall bucket and key live upstream.

* Direct mapping (default): Squall bucket ``b`` is the upstream bucket ``b``; keys unchanged.
* Shared mapping (``bucket=NAME``, optional ``prefix=P``): everything lives in the one
  upstream bucket NAME. Squall bucket ``b`` exists iff the empty marker object ``P + b``
  exists; its objects are the keys under ``P + b + "/"``. Bucket names never contain
  ``/``, so markers and object keys cannot collide.

Internal keys (``INTERNAL_PREFIX``, e.g. version records) are stored upstream under
``INTERNAL_UPSTREAM`` instead, because some S3 services (Squall among them) refuse keys
that start with U+007F; client keys under that prefix are refused (InvalidKey).
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.errors import InvalidKey
from backends.keys import INTERNAL_PREFIX

INTERNAL_UPSTREAM = ".squall-internal/"


@dataclass(frozen=True, slots=True)
class Location:
    """An upstream bucket and the key prefix holding one Squall bucket's objects."""

    bucket: str
    prefix: str

    def key(self, key: str) -> str:
        """The upstream key of a Squall key (InvalidKey for a reserved one)."""
        if key.startswith(INTERNAL_PREFIX):
            return self.prefix + INTERNAL_UPSTREAM + key[len(INTERNAL_PREFIX):]
        if key.startswith(INTERNAL_UPSTREAM):
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

    def marker(self, bucket: str) -> str:
        """Shared mode: the key of the object that says bucket ``bucket`` exists."""
        return f"{self.prefix}{bucket}"

    def bucket_of_marker(self, upstream_key: str) -> str | None:
        """The Squall bucket a listed upstream key is the marker of, or None."""
        if not upstream_key.startswith(self.prefix):
            return None
        name = upstream_key[len(self.prefix):]
        return name if name and "/" not in name else None
