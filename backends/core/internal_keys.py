"""The layout of the keys the gateway keeps for itself (they start with INTERNAL_PREFIX).

* **Version records** (noncurrent versions and delete markers, gateway/versioning):
  ``VERSION_RECORDS + escape(key) + RECORD_SEPARATOR + suffix``, where ``key`` is the
  user key and ``suffix`` names the version (docs/versioning.md). ``escape`` writes every
  tab of the key as tab + newline, so the separator (two tabs) never occurs in an escaped
  key, ends it unambiguously, and sorts below any continuation of it: the records of one
  key are contiguous and keys sort as their records do.
* **Bucket configuration** (versioning status, CORS, tags, lifecycle):
  ``CONFIG_PREFIX + name``.

The one definition that the versioning layer (which writes these keys) and the cluster
ring (which places a key's version records with the key) both read. Standard library only:
``gateway.cluster.client`` computes owners with it on the client side.
"""

from __future__ import annotations

from backends.core.keys import INTERNAL_PREFIX

VERSION_RECORDS = INTERNAL_PREFIX + "v/"
CONFIG_PREFIX = INTERNAL_PREFIX + "c/"
RECORD_SEPARATOR = "\t\t"


def escape(key: str) -> str:
    """``key`` with every tab written as tab + newline."""
    return key.replace("\t", "\t\n")


def unescape(text: str) -> str:
    return text.replace("\t\n", "\t")


def record_base(key: str) -> str:
    """The prefix shared by every version record of ``key`` (and of no other key)."""
    return VERSION_RECORDS + escape(key) + RECORD_SEPARATOR


def split_record(stored_key: str) -> tuple[str, str] | None:
    """``(user key, suffix)`` of a version record's key; None for any other key."""
    if not stored_key.startswith(VERSION_RECORDS):
        return None
    escaped, sep, suffix = stored_key[len(VERSION_RECORDS):].partition(RECORD_SEPARATOR)
    if not sep:
        return None
    return unescape(escaped), suffix
