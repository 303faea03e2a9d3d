"""Strict parsing of the numbers on the wire (S3 and peer protocols): headers, query

A number is ASCII digits only, with a bounded count of them. ``str.isdigit`` and ``int``
both accept "²" and the Arabic-Indic or full-width digits, and ``int`` parses thousands of
digits (and past 4,300 raises ``ValueError``); none of that may reach a handler. Each
parser returns ``None`` for anything that is not a number, so that the caller raises the
S3 error of its own field (InvalidArgument, MalformedXML, ...) or ignores the value
where S3 does (an unparsable Range).
"""

from __future__ import annotations

#: the most digits of any number on the wire: 2**63 - 1 (S3's sizes and offsets are
#: 64-bit) has 19, so a longer number is out of every range S3 accepts
MAX_DIGITS = 19
#: the upper bound of S3's 32-bit integer fields (max-keys, max-uploads, part numbers...)
INT32_MAX = 2**31 - 1


def natural(text: str, max_digits: int = MAX_DIGITS) -> int | None:
    """``text`` as a non-negative integer: 1 to ``max_digits`` ASCII digits, no sign, no
    spaces, no underscores; ``None`` otherwise."""
    if 0 < len(text) <= max_digits and text.isascii() and text.isdigit():
        return int(text)
    return None


def integer(text: str, max_digits: int = MAX_DIGITS) -> int | None:
    """``text`` as an integer: an optional ``+`` or ``-``, then what :func:`natural`
    accepts; ``None`` otherwise."""
    if text[:1] in ("+", "-"):
        value = natural(text[1:], max_digits)
        return -value if value is not None and text[0] == "-" else value
    return natural(text, max_digits)
