"""S3 key and bucket-name rules shared by every layer that must refuse one before storing it."""

from __future__ import annotations

from backends.core.errors import InvalidBucketName, InvalidKey, KeyTooLong

MAX_KEY_BYTES = 1024
BUCKET_MAX_BYTES = 255  # one directory name on the local-disk backends
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


def check_bucket(bucket: str) -> None:
    """Refuse bucket names that are not one plain directory name (InvalidBucketName)."""
    if (not bucket or bucket in (".", "..") or bucket.startswith(".") or "/" in bucket
            or "\0" in bucket
            or len(bucket.encode("utf-8", "surrogatepass")) > BUCKET_MAX_BYTES):
        raise InvalidBucketName(f"Bucket name {bucket!r} is not valid.")
