"""The POST policy of a browser upload: its signature (SigV4 or SigV2), expiration and
conditions, checked as S3 checks them.

The policy is a base64 JSON document ``{"expiration": ..., "conditions": [...]}`` signed
with the uploader's key: SigV4 (``x-amz-algorithm``, ``x-amz-credential``,
``x-amz-date``, ``x-amz-signature`` = HMAC-SHA256 of the base64 policy under the day's
signing key) or SigV2 (``AWSAccessKeyId``, ``signature`` = base64 HMAC-SHA1). Every form
field but the exempt ones must be named by a condition; the file's length is checked
against ``content-length-range`` while it streams (:class:`LengthRange`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from backends.core.errors import EntityTooLarge, EntityTooSmall
from gateway.protocol.errors import (
    AccessDenied,
    InvalidAccessKeyId,
    InvalidArgument,
    InvalidPolicyDocument,
    SignatureDoesNotMatch,
)
from gateway.s3api.sigv4 import ALGORITHM, parse_amz_date, sign_hex, signing_key

#: fields no condition needs to name (S3: the signature, the file, the policy, x-ignore-*;
#: and x-amz-checksum-*, see check_conditions)
_EXEMPT = frozenset({"x-amz-signature", "signature", "awsaccesskeyid", "file", "policy"})
_V4_FIELDS = ("x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-signature")
_EXPIRATION = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z")
_MISSING = "Bucket POST must contain a field named '{}'.  If it is specified, please check " \
           "the order of the fields."


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition: ``eq`` or ``starts-with`` on a field (lowercase name)."""

    op: str
    field: str
    value: str
    text: str  # as S3 prints it in "Policy Condition failed: ..."

    def holds(self, fields: Mapping[str, str]) -> bool:
        actual = fields.get(self.field)
        if self.op == "eq":
            return actual == self.value
        if actual is None:
            return self.value == ""
        if self.field == "content-type":  # each of a comma-separated list
            return all(v.strip().startswith(self.value) for v in actual.split(","))
        return actual.startswith(self.value)


@dataclass(frozen=True, slots=True)
class LengthRange:
    """``content-length-range``: the file's size bounds, inclusive."""

    low: int
    high: int

    def check_growing(self, size: int) -> None:
        if size > self.high:
            raise EntityTooLarge("Your proposed upload exceeds the maximum allowed size")

    def check_final(self, size: int) -> None:
        self.check_growing(size)
        if size < self.low:
            raise EntityTooSmall("Your proposed upload is smaller than the minimum allowed "
                                 "size")


@dataclass(frozen=True, slots=True)
class PostPolicy:
    expiration: float
    conditions: tuple[Condition, ...]
    length: LengthRange | None


def _invalid(detail: str) -> InvalidPolicyDocument:
    return InvalidPolicyDocument(f"Invalid Policy: {detail}")


def _text(op: str, name: str, value: object) -> str:
    return json.dumps([op, name, value], ensure_ascii=False)


def parse_policy(encoded: str) -> PostPolicy:
    """The policy of the ``policy`` field; InvalidPolicyDocument when it is not one."""
    try:
        document = json.loads(base64.b64decode(encoded, validate=False))
    except (binascii.Error, ValueError):
        raise _invalid("Invalid JSON.") from None
    if not isinstance(document, dict):
        raise _invalid("Invalid JSON.")
    raw_expiration = document.get("expiration")
    if raw_expiration is None:
        raise _invalid("Policy missing expiration.")
    if not isinstance(raw_expiration, str) or not _EXPIRATION.fullmatch(raw_expiration):
        raise _invalid(f"Invalid 'expiration' value: '{raw_expiration}'")
    expiration = datetime.strptime(raw_expiration[:19], "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=UTC).timestamp()
    raw_conditions = document.get("conditions")
    if raw_conditions is None:
        raise _invalid("Policy missing conditions.")
    if not isinstance(raw_conditions, list):
        raise _invalid("Invalid 'conditions' value: must be a List.")
    conditions: list[Condition] = []
    length: LengthRange | None = None
    for raw in raw_conditions:
        if isinstance(raw, dict):
            if len(raw) != 1:
                raise _invalid("Invalid Simple-Condition: Simple-Conditions must have "
                               "exactly one property specified.")
            name, value = next(iter(raw.items()))
            if not isinstance(value, str):
                raise _invalid(f"Invalid Simple-Condition: value of {name} must be a string.")
            conditions.append(Condition("eq", name.lower(), value,
                                        _text("eq", f"${name}", value)))
        elif isinstance(raw, list) and raw and isinstance(raw[0], str):
            op = raw[0].lower()
            if op == "content-length-range":
                length = _length_range(raw)
                continue
            if op not in ("eq", "starts-with"):
                raise _invalid(f"Invalid Condition: unknown operation '{raw[0]}'.")
            if len(raw) != 3 or not all(isinstance(v, str) for v in raw[1:]):
                raise _invalid(f"Invalid {raw[0]} Condition: wrong number of arguments.")
            name, value = raw[1], raw[2]
            # A name without its "$" names no field: the condition cannot hold.
            field = name[1:].lower() if name.startswith("$") else "\0" + name
            conditions.append(Condition(op, field, value, _text(op, name, value)))
        else:
            raise _invalid("Invalid Condition: must be an Object or an Array.")
    return PostPolicy(expiration=expiration, conditions=tuple(conditions), length=length)


def _length_range(raw: list[object]) -> LengthRange:
    if len(raw) != 3:
        raise _invalid("Invalid content-length-range Condition: wrong number of arguments.")
    bounds: list[int] = []
    for value in raw[1:]:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise _invalid("Invalid content-length-range Condition: bounds must be numbers.")
        try:
            bound = int(value)
        except ValueError:
            raise _invalid("Invalid content-length-range Condition: bounds must be "
                           "numbers.") from None
        if bound < 0:
            raise _invalid("Invalid content-length-range Condition: bounds must not be "
                           "negative.")
        bounds.append(bound)
    return LengthRange(bounds[0], bounds[1])


@dataclass(frozen=True, slots=True)
class Signer:
    """Who signed a policy: the access key, or "" for an anonymous upload (no policy)."""

    access_key: str
    policy: PostPolicy | None


def verify(fields: Mapping[str, str], secret_for: Callable[[str], str | None]) -> Signer:
    """Check the form's signature of its policy; the signer and the parsed policy.

    A form without signature fields is anonymous (its policy, if any, is still checked).
    """
    encoded = fields.get("policy")
    v4 = any(name in fields for name in _V4_FIELDS)
    v2 = "awsaccesskeyid" in fields or "signature" in fields
    if not v4 and not v2:
        return Signer("", parse_policy(encoded) if encoded else None)
    if v4:
        for name in ("x-amz-credential", "x-amz-signature", "x-amz-algorithm", "x-amz-date"):
            if not fields.get(name):
                raise InvalidArgument(_MISSING.format(_FORM_NAMES[name]))
    else:
        for name in ("awsaccesskeyid", "signature"):
            if not fields.get(name):
                raise InvalidArgument(_MISSING.format(_FORM_NAMES[name]))
    if not encoded:
        raise InvalidArgument(_MISSING.format("policy"))
    access_key = _check_v4(fields, encoded, secret_for) if v4 else \
        _check_v2(fields, encoded, secret_for)
    return Signer(access_key, parse_policy(encoded))


_FORM_NAMES = {"x-amz-credential": "X-Amz-Credential", "x-amz-signature": "X-Amz-Signature",
               "x-amz-algorithm": "X-Amz-Algorithm", "x-amz-date": "X-Amz-Date",
               "awsaccesskeyid": "AWSAccessKeyId", "signature": "Signature"}


def _check_v4(fields: Mapping[str, str], encoded: str,
              secret_for: Callable[[str], str | None]) -> str:
    if fields["x-amz-algorithm"] != ALGORITHM:
        raise InvalidArgument('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
    parts = fields["x-amz-credential"].split("/")
    if len(parts) != 5 or parts[3] != "s3" or parts[4] != "aws4_request":
        raise InvalidArgument('Error parsing the X-Amz-Credential parameter; the Credential '
                              'is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/'
                              'aws4_request".')
    access_key, date, region = parts[0], parts[1], parts[2]
    amz_date = fields["x-amz-date"]
    if parse_amz_date(amz_date) is None:
        raise InvalidArgument("X-Amz-Date must be in the ISO8601 Long Format "
                              "\"yyyyMMdd'T'HHmmss'Z'\"")
    if amz_date[:8] != date:
        raise InvalidArgument("Invalid credential date. Date is not the same as X-Amz-Date.")
    secret = secret_for(access_key)
    if secret is None:
        raise InvalidAccessKeyId()
    expected = sign_hex(signing_key(secret, date, region), encoded)
    if not hmac.compare_digest(expected, fields["x-amz-signature"].strip().lower()):
        raise SignatureDoesNotMatch()
    return access_key


def _check_v2(fields: Mapping[str, str], encoded: str,
              secret_for: Callable[[str], str | None]) -> str:
    access_key = fields["awsaccesskeyid"]
    secret = secret_for(access_key)
    if secret is None:
        raise InvalidAccessKeyId()
    expected = base64.b64encode(hmac.digest(secret.encode("utf-8"), encoded.encode("utf-8"),
                                            hashlib.sha1))
    if not hmac.compare_digest(expected, fields["signature"].strip().encode("utf-8",
                                                                          "replace")):
        raise SignatureDoesNotMatch()
    return access_key


def check_conditions(policy: PostPolicy, fields: Mapping[str, str],
                     names: Mapping[str, str], now: float) -> None:
    """AccessDenied (with S3's message) when the policy has expired, a condition fails, or a
    form field is named by no condition. ``fields`` holds the form's fields (lowercase
    names, ``key`` with ``${filename}`` replaced) and ``bucket``."""
    if now > policy.expiration:
        raise AccessDenied("Invalid according to Policy: Policy expired.")
    for condition in policy.conditions:
        if not condition.holds(fields):
            raise AccessDenied("Invalid according to Policy: Policy Condition failed: "
                               + condition.text)
    named = {c.field for c in policy.conditions}
    for name in fields:
        # A checksum only narrows what is accepted: it needs no condition either.
        if name in _EXEMPT or name.startswith(("x-ignore-", "x-amz-checksum-")) \
                or name in named:
            continue
        raise AccessDenied("Invalid according to Policy: Extra input fields: "
                           + names.get(name, name))
