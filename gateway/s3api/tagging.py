"""Tagging documents (object and bucket): parsing ``<Tagging>`` and writing a sorted TagSet."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.protocol.errors import InvalidTag, MalformedXML
from gateway.protocol.xml import el, parse, text


def parse_tagging(document: bytes) -> dict[str, str]:
    """The tags of a ``<Tagging><TagSet><Tag>`` document; InvalidTag for a repeated key
    or a document that is not UTF-8 (a tag is text)."""
    try:
        document.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidTag("The TagValue you have provided is invalid") from None
    root = parse(document, "Tagging")
    tag_set = root.find("TagSet")
    if tag_set is None:
        raise MalformedXML()
    pairs = [(text(t, "Key", required=True) or "", text(t, "Value", required=True) or "")
             for t in tag_set.findall("Tag")]
    tags = dict(pairs)
    if len(tags) != len(pairs):
        raise InvalidTag("Cannot provide multiple Tags with the same key")
    return tags


def tag_set_xml(tags: Mapping[str, str]) -> str:
    """``<TagSet>`` with the tags sorted by key, as S3 returns them."""
    items = "".join(f"<Tag>{el('Key', k)}{el('Value', tags[k])}</Tag>" for k in sorted(tags))
    return f"<TagSet>{items}</TagSet>"
