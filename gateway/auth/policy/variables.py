"""Policy variables (Version ``2012-10-17`` only): ``${aws:username}`` and
``${aws:userid}`` stand for the request's value, ``${*}``, ``${?}`` and ``${$}`` for the
characters themselves. A variable the request has no value for matches nothing."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway.auth.policy.wildcard import compile_wildcard
from gateway.protocol.errors import MalformedPolicy

VARIABLES = {"aws:username": "aws:username", "aws:userid": "aws:userid"}
_ESCAPES = {"*", "?", "$"}
_VAR = re.compile(r"\$\{([^}]*)\}")

#: literal text, or ("var", lowercase key), or ("chr", a character that is not a wildcard)
Part = str | tuple[str, str]
Template = tuple[Part, ...]


def has_variables(text: str) -> bool:
    return "${" in text


def parse_template(text: str) -> Template:
    """``text`` cut into literal runs and variables; MalformedPolicy for a variable
    Squall does not know."""
    parts: list[Part] = []
    at = 0
    for match in _VAR.finditer(text):
        if match.start() > at:
            parts.append(text[at:match.start()])
        name = match.group(1).strip()
        if name in _ESCAPES:
            parts.append(("chr", name))
        elif name.lower() in VARIABLES:
            parts.append(("var", name.lower()))
        else:
            raise MalformedPolicy(f"Policy has an unsupported variable: ${{{name}}} (Squall "
                                  "knows ${aws:username} and ${aws:userid})")
        at = match.end()
    if at < len(text):
        parts.append(text[at:])
    return tuple(parts)


def substitute(template: Template, context: Mapping[str, Any], *,
               wildcards: bool) -> str | None:
    """A regular expression for ``template`` with the request's values in place (with
    ``wildcards``, ``*`` and ``?`` of literal runs match as in IAM), or the plain string
    without ``wildcards``; None when the request lacks a variable."""
    out = []
    for part in template:
        if isinstance(part, str):
            out.append(compile_wildcard(part).pattern if wildcards else part)
            continue
        kind, value = part
        if kind == "chr":
            out.append(re.escape(value) if wildcards else value)
            continue
        known = context.get(value)
        if known is None:
            return None
        out.append(re.escape(str(known)) if wildcards else str(known))
    return "".join(out)
