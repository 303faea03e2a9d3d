"""S3 XML documents: rendering responses and parsing request bodies (defusedxml)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from xml.etree.ElementTree import Element

from defusedxml import ElementTree as SafeET
from defusedxml.common import DefusedXmlException

from gateway.protocol.errors import MalformedXML

S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
# The gateway as owner, shown where no owner is known (an endpoint without users,
# ListParts); listings name real owners (gateway/auth/owners.py), ListBuckets the caller
# (gateway/s3api/handlers/buckets.py).
OWNER = "<Owner><ID>squall</ID><DisplayName>squall</DisplayName></Owner>"


INITIATOR = "<Initiator><ID>squall</ID><DisplayName>squall</DisplayName></Initiator>"
_DECL = '<?xml version="1.0" encoding="UTF-8"?>\n'
# S3 writes CR and LF as character references, and so every other control character
# (which XML 1.0 cannot carry at all: a client that may meet them asks for
# ``encoding-type=url``, which boto3 does on its own for listings).
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                          "'": "&apos;",
                          **{chr(c): f"&#{c};" for c in range(32) if c != 9}})


_SPECIAL = re.compile("[&<>\"'\x00-\x08\x0a-\x1f]")


def esc(value: object) -> str:
    text = str(value)
    return text.translate(_ESCAPES) if _SPECIAL.search(text) else text


def iso8601(epoch: float) -> str:
    """``2009-10-12T17:50:30.000Z`` as S3 writes timestamps in XML."""
    millis = round(epoch * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{millis:03d}Z"


def el(tag: str, value: object) -> str:
    return f"<{tag}>{esc(value)}</{tag}>"


def etag_el(etag: str) -> str:
    """``<ETag>`` of ``etag``, in its quotes (escaped)."""
    return f"<ETag>&quot;{esc(etag)}&quot;</ETag>"


def opt(tag: str, value: object | None) -> str:
    return "" if value is None else el(tag, value)


def document(root: str, parts: Iterable[str], *, namespace: bool = True) -> bytes:
    ns = f' xmlns="{S3_NS}"' if namespace else ""
    return f"{_DECL}<{root}{ns}>{''.join(parts)}</{root}>".encode()


def parse(body: bytes, root: str) -> Element:
    """Parse a request document whose root element must be ``root`` (namespace optional)."""
    try:
        tree = SafeET.fromstring(body)
    except (SafeET.ParseError, DefusedXmlException, ValueError) as exc:
        raise MalformedXML() from exc
    _strip_namespaces(tree)
    if tree.tag != root:
        raise MalformedXML(f"The root element must be {root}, not {tree.tag}.")
    return tree


def _strip_namespaces(node: Element) -> None:
    for item in node.iter():
        if isinstance(item.tag, str) and item.tag.startswith("{"):
            item.tag = item.tag.split("}", 1)[1]


def text(node: Element, tag: str, *, required: bool = False) -> str | None:
    child = node.find(tag)
    if child is None:
        if required:
            raise MalformedXML(f"Missing element {tag}.")
        return None
    return child.text or ""
