"""S3 object-key rules shared by every layer that must refuse a key before storing it."""

from __future__ import annotations

from backends.errors import InvalidKey, KeyTooLong

MAX_KEY_BYTES = 1024
# Keys the gateway keeps for itself start with this character, which clients may not
# use: version records and bucket settings. A backend stores them like other keys but
# may keep them apart; a listing returns them only when its prefix starts with it.
INTERNAL_PREFIX = "\x7f"
MAX_INTERNAL_KEY_BYTES = 3 * MAX_KEY_BYTES  # a client key, escaped, plus a version


def check_key(key: str) -> None:
    """InvalidKey (empty, not UTF-8) or KeyTooLong (over 1024 bytes of UTF-8)."""
    if not key:
        raise InvalidKey("The key must not be empty.")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidKey("The key is not valid UTF-8.") from exc
    limit = MAX_INTERNAL_KEY_BYTES if key.startswith(INTERNAL_PREFIX) else MAX_KEY_BYTES
    if size > limit:
        raise KeyTooLong(f"The key is {size} bytes long; the limit is {MAX_KEY_BYTES}.")
