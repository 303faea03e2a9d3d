"""IAM wildcards: ``*`` matches any run of characters (``/`` and ``:`` included), ``?``
exactly one; every other character stands for itself (no character classes, unlike
:mod:`fnmatch`)."""

from __future__ import annotations

import re

_TOKENS = re.compile(r"(\*+|\?)")


def compile_wildcard(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """A regular expression that fully matches what ``pattern`` matches."""
    parts = []
    for token in _TOKENS.split(pattern):
        if not token:
            continue
        if token[0] == "*":
            parts.append(".*")
        elif token == "?":
            parts.append(".")
        else:
            parts.append(re.escape(token))
    flags = re.DOTALL | (re.IGNORECASE if ignore_case else 0)
    return re.compile("".join(parts), flags)


def has_wildcard(text: str) -> bool:
    return "*" in text or "?" in text
