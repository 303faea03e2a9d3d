"""The few S3 XML documents the load tests read: error codes and ListObjectsV2 pages.

The documents come from the server under test; parsing is deliberately lenient about
namespaces.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ListEntry:
    key: str
    size: int
    etag: str


@dataclass(slots=True)
class ListV2Result:
    entries: list[ListEntry] = field(default_factory=list)
    truncated: bool = False
    token: str | None = None


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def error_code(body: bytes) -> str:
    """The ``<Code>`` of an S3 error document, or "" when there is none."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return ""
    for elem in root.iter():
        if _local(elem.tag) == "Code":
            return elem.text or ""
    return ""


def parse_list_v2(body: bytes) -> ListV2Result:
    """Parse a ListObjectsV2 result document."""
    root = ET.fromstring(body)
    page = ListV2Result()
    for child in root:
        name = _local(child.tag)
        if name == "Contents":
            fields = {_local(c.tag): c.text or "" for c in child}
            page.entries.append(
                ListEntry(
                    fields.get("Key", ""), int(fields.get("Size") or 0), fields.get("ETag", "")
                )
            )
        elif name == "IsTruncated":
            page.truncated = (child.text or "").strip().lower() == "true"
        elif name == "NextContinuationToken":
            page.token = child.text
    return page
