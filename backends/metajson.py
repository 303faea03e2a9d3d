"""ObjectMeta as JSON: the form the local-disk backends keep in their metadata records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backends.core.base import ObjectMeta

_META_FIELDS = ("content_type", "content_encoding", "content_disposition", "content_language",
                "cache_control", "expires")


def meta_to_json(meta: ObjectMeta) -> dict[str, Any]:
    """The JSON form of ``meta`` (absent fields left out)."""
    out: dict[str, Any] = {name: getattr(meta, name) for name in _META_FIELDS
                           if getattr(meta, name) is not None}
    if meta.user:
        out["user"] = dict(meta.user)
    if meta.tags:
        out["tags"] = dict(meta.tags)
    if meta.checksum is not None:
        out["checksum"] = list(meta.checksum)
    return out


def meta_from_json(data: Mapping[str, Any]) -> ObjectMeta:
    """ObjectMeta from its JSON form; ValueError if malformed."""
    fields: dict[str, Any] = {}
    for name in _META_FIELDS:
        value = data.get(name)
        if value is not None:
            if not isinstance(value, str):
                raise ValueError(f"bad {name}")
            fields[name] = value
    for name in ("user", "tags"):
        value = data.get(name, {})
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ValueError(f"bad {name}")
        fields[name] = value
    checksum = data.get("checksum")
    if checksum is not None:
        if (not isinstance(checksum, list) or len(checksum) != 2
                or not all(isinstance(x, str) for x in checksum)):
            raise ValueError("bad checksum")
        fields["checksum"] = (checksum[0], checksum[1])
    return ObjectMeta(**fields)
