"""S3 object-key rules shared by every layer that must refuse a key before storing it."""

from __future__ import annotations

from backends.errors import InvalidKey, KeyTooLong

MAX_KEY_BYTES = 1024


def check_key(key: str) -> None:
    """InvalidKey (empty, not UTF-8) or KeyTooLong (over 1024 bytes of UTF-8)."""
    if not key:
        raise InvalidKey("The key must not be empty.")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidKey("The key is not valid UTF-8.") from exc
    if size > MAX_KEY_BYTES:
        raise KeyTooLong(f"The key is {size} bytes long; the limit is {MAX_KEY_BYTES}.")
