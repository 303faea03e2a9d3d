"""Where keys live in the tree: the reversible key <-> path encoding (layout format 1).

A key is split on ``/`` into segments; each segment becomes one file name, or a short
chain of names when it is too long for one. Plain segments stay as they are, so the key
``a/b/c.txt`` is the file ``a/b/c.txt``. Everything a file system cannot hold verbatim is
escaped with names that start with ``%%`` (see docs/posix-layout.md):

* ``%%q<text>``  a segment that is empty, ``.``, ``..`` or starts with ``%%``;
* ``%%c<text>``  a directory holding the continuation of a segment longer than a name;
* ``%%o<name>``  the object ``<name>`` when a directory ``<name>`` (keys below it) exists.

In every escaped ``<text>``, ``%`` is written ``%25`` and nothing else changes. Names are
built from the key alone, never from a path the client chose, so no name is ``.``/``..``
or contains ``/``: a key cannot resolve outside its bucket directory.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.core.errors import InvalidKey, KeyTooLong
from backends.core.keys import check_key

FORMAT_VERSION = 1
MARK = "%%"
ESCAPED = "%%q"
CONTINUED = "%%c"
DISPLACED = "%%o"
NAME_MAX = 255
LEAF_MAX = NAME_MAX - len(DISPLACED)  # room to displace any leaf name as %%o<name>


def _nbytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _escape(text: str) -> str:
    return text.replace("%", "%25")


def _unescape(text: str) -> str:
    return text.replace("%25", "%")


def leaf_name(segment: str) -> str:
    """The one-name encoding of a whole segment (it may still be too long to use)."""
    if segment in ("", ".", "..") or segment.startswith(MARK):
        return ESCAPED + _escape(segment)
    return segment


def encode_segment(segment: str) -> tuple[str, ...]:
    """The names for one key segment: zero or more ``%%c`` directories, then a leaf."""
    names: list[str] = []
    rest = segment
    while _nbytes(leaf := leaf_name(rest)) > LEAF_MAX:
        # Greedy: the longest head (whole characters) whose %%c name fits, never all of rest.
        budget = NAME_MAX - len(CONTINUED)
        used = 0
        cut = 0
        for char in rest[:-1]:
            size = _nbytes(_escape(char))
            if used + size > budget:
                break
            used += size
            cut += 1
        names.append(CONTINUED + _escape(rest[:cut]))
        rest = rest[cut:]
    names.append(leaf)
    return tuple(names)


@dataclass(frozen=True, slots=True)
class KeyPath:
    """The encoded location of one key inside its bucket directory."""

    key: str
    dirs: tuple[str, ...]  # directory names from the bucket directory down to the leaf's
    leaf: str  # the object's file name when no directory of that name exists
    # For each entry of ``dirs``: the key of the object that the same name would hold as a
    # file (a directory that ends a segment), or None for a continuation directory.
    owners: tuple[str | None, ...]

    @property
    def displaced(self) -> str:
        """The object's file name while a directory named ``leaf`` exists."""
        return DISPLACED + self.leaf


def encode_key(key: str) -> KeyPath:
    """The KeyPath of ``key``; InvalidKey (empty, not UTF-8) or KeyTooLong (> 1024 bytes)."""
    check_key(key)
    segments = key.split("/")
    dirs: list[str] = []
    owners: list[str | None] = []
    for index, segment in enumerate(segments):
        names = encode_segment(segment)
        if index == len(segments) - 1:
            dirs.extend(names[:-1])
            owners.extend([None] * (len(names) - 1))
            return KeyPath(key, tuple(dirs), names[-1], tuple(owners))
        dirs.extend(names)
        owners.extend([None] * (len(names) - 1))
        owners.append("/".join(segments[: index + 1]) or None)  # "" is no key
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True, slots=True)
class Decoded:
    """What one directory entry name stands for, for listing."""

    kind: str  # "segment" (a leaf name), "continued" (a %%c piece), "displaced" (%%o)
    text: str


def decode_name(name: str) -> Decoded | None:
    """Decode one entry name; None for a name in the escape space that is not ours."""
    if name.startswith(CONTINUED):
        return Decoded("continued", _unescape(name[len(CONTINUED):]))
    if name.startswith(DISPLACED):
        inner = decode_name(name[len(DISPLACED):])
        if inner is None or inner.kind != "segment":
            return None
        return Decoded("displaced", inner.text)
    if name.startswith(ESCAPED):
        return Decoded("segment", _unescape(name[len(ESCAPED):]))
    if name.startswith(MARK):
        return None
    return Decoded("segment", name)


def is_canonical(key: str, dirs: tuple[str, ...], name: str) -> bool:
    """Whether the entry ``dirs/name`` is exactly where ``key`` is stored."""
    try:
        path = encode_key(key)
    except (InvalidKey, KeyTooLong):
        return False
    return path.dirs == dirs and name in (path.leaf, path.displaced)
