"""Owners and access control lists: canned ACLs, ``x-amz-grant-*`` headers, the
AccessControlPolicy XML document, and the compact form kept with buckets and objects.

A grantee is a canonical user id (64 hex digits) or a group URI (AllUsers,
AuthenticatedUsers, LogDelivery). Grants by e-mail address are refused as S3 refuses them
where they are not supported (UnresolvableGrantByEmailAddress).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from xml.etree.ElementTree import Element

from gateway.auth.actions import Permission
from gateway.protocol.errors import (
    InvalidArgument,
    InvalidRequest,
    MalformedACLError,
    MalformedXML,
    UnresolvableGrantByEmailAddress,
)
from gateway.protocol.xml import el, parse

#: user metadata name under which an object's owner and ACL are kept (never shown)
ACL_METADATA = "squall-acl"
GROUPS = "http://acs.amazonaws.com/groups/"
ALL_USERS = GROUPS + "global/AllUsers"
AUTHENTICATED_USERS = GROUPS + "global/AuthenticatedUsers"
LOG_DELIVERY = GROUPS + "s3/LogDelivery"
KNOWN_GROUPS = frozenset({ALL_USERS, AUTHENTICATED_USERS, LOG_DELIVERY})
PUBLIC_GROUPS = frozenset({ALL_USERS, AUTHENTICATED_USERS})
#: S3's canonical id of anonymous requesters (the owner of what they write)
ANONYMOUS_ID = "65a011a29cdf8ec533ec3d1ccaae921c"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
MAX_GRANTS = 100  # S3's limit per ACL
GRANT_HEADERS: Mapping[str, Permission] = {
    "x-amz-grant-read": Permission.READ,
    "x-amz-grant-write": Permission.WRITE,
    "x-amz-grant-read-acp": Permission.READ_ACP,
    "x-amz-grant-write-acp": Permission.WRITE_ACP,
    "x-amz-grant-full-control": Permission.FULL_CONTROL,
}
CANNED = ("private", "public-read", "public-read-write", "authenticated-read",
          "aws-exec-read", "bucket-owner-read", "bucket-owner-full-control",
          "log-delivery-write")
#: S3's canned ACL that also grants READ to Amazon EC2 (to fetch AMI bundles): no such
#: service reads through this gateway, so only the owner's grant is kept; it still counts
#: as granting to someone beyond the bucket owner (refused where ACLs are disabled).
EXEC_READ = "aws-exec-read"
_CANONICAL_ID = re.compile(r"[0-9a-f]{64}")
_GRANTEE = re.compile(r'\s*(id|uri|emailAddress)\s*=\s*(?:"([^"]*)"|([^,\s]*))\s*(?:,|$)',
                      re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Grant:
    grantee: str  # canonical id or group URI
    permission: Permission

    @property
    def is_group(self) -> bool:
        return self.grantee.startswith(GROUPS)


@dataclass(frozen=True, slots=True)
class Acl:
    """An owner and what others may do."""

    owner: str
    grants: tuple[Grant, ...]

    @property
    def is_public(self) -> bool:
        """Whether it grants anything to everyone or to every signed user (S3's test)."""
        return any(g.grantee in PUBLIC_GROUPS for g in self.grants)

    def allows(self, user_id: str | None, permission: Permission, *,
               ignore_public: bool = False) -> bool:
        """Whether ``user_id`` (None: anonymous) holds ``permission`` through a grant."""
        for grant in self.grants:
            if grant.permission is not permission and \
                    grant.permission is not Permission.FULL_CONTROL:
                continue
            grantee = grant.grantee
            if grantee == user_id and user_id is not None:
                return True
            if ignore_public:
                continue
            if grantee == ALL_USERS or (grantee == AUTHENTICATED_USERS and
                                        user_id is not None):
                return True
        return False

    def to_json(self) -> dict[str, object]:
        return {"o": self.owner, "g": [[g.grantee, g.permission.value] for g in self.grants]}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Acl:
        grants = doc.get("g", [])
        if not isinstance(grants, list):
            raise TypeError("damaged ACL")
        return cls(str(doc["o"]), tuple(Grant(str(g), Permission(p)) for g, p in grants))

    def encode(self) -> str:
        """The compact form kept in an object's metadata."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def decode(cls, raw: str) -> Acl:
        return cls.from_json(json.loads(raw))


def private(owner: str) -> Acl:
    """The default ACL: the owner has full control."""
    return Acl(owner, (Grant(owner, Permission.FULL_CONTROL),))


def canned(name: str, owner: str, bucket_owner: str) -> Acl:
    """The canned ACL ``name``; InvalidArgument if S3 knows no such name.

    The groups' grants come before the owner's, in the order clients of the canned ACLs
    read them (s3-tests takes the third grant of ``public-read-write`` as the owner's)."""
    groups: list[Grant] = []
    users = [Grant(owner, Permission.FULL_CONTROL)]
    if name == "public-read":
        groups.append(Grant(ALL_USERS, Permission.READ))
    elif name == "public-read-write":
        groups += [Grant(ALL_USERS, Permission.READ), Grant(ALL_USERS, Permission.WRITE)]
    elif name == "authenticated-read":
        groups.append(Grant(AUTHENTICATED_USERS, Permission.READ))
    elif name == "bucket-owner-read":
        if bucket_owner != owner:
            users.append(Grant(bucket_owner, Permission.READ))
    elif name == "bucket-owner-full-control":
        if bucket_owner != owner:
            users.append(Grant(bucket_owner, Permission.FULL_CONTROL))
    elif name == "log-delivery-write":
        groups += [Grant(LOG_DELIVERY, Permission.WRITE), Grant(LOG_DELIVERY, Permission.READ_ACP)]
    elif name not in ("private", EXEC_READ):
        raise InvalidArgument(f"Argument x-amz-acl must be one of {', '.join(CANNED)}; "
                              f"not {name!r}.")
    return Acl(owner, tuple(groups + users))


def grants_beyond(acl: Acl, headers: Mapping[str, str]) -> bool:
    """Whether the ACL that ``headers`` (or a document) asked for gives anything to anyone
    but its owner (``aws-exec-read`` does: EC2's READ)."""
    return headers.get("x-amz-acl", "").strip() == EXEC_READ or \
        any(g.grantee != acl.owner for g in acl.grants)


def has_acl_headers(headers: Mapping[str, str]) -> bool:
    return "x-amz-acl" in headers or any(name in headers for name in GRANT_HEADERS)


def from_headers(headers: Mapping[str, str], *, owner: str, bucket_owner: str,
                 known: Callable[[str], bool]) -> Acl | None:
    """The ACL that ``x-amz-acl`` or ``x-amz-grant-*`` ask for, None if neither is sent;
    ``known(canonical_id)`` tells whether a user exists."""
    name = headers.get("x-amz-acl")
    granted = [(header, perm) for header, perm in GRANT_HEADERS.items() if header in headers]
    if name is not None and granted:
        raise InvalidRequest("Specifying both Canned ACLs and Header Grants is not allowed")
    if name is not None:
        return canned(name.strip(), owner, bucket_owner)
    if not granted:
        return None
    grants: list[Grant] = []
    for header, perm in granted:
        value = headers[header]
        pos = 0
        while pos < len(value):
            match = _GRANTEE.match(value, pos)
            if match is None or match.end() == pos:
                raise InvalidArgument(f"Invalid value of {header}: {value!r}.")
            pos = match.end()
            kind, grantee = match.group(1).lower(), match.group(2) or match.group(3) or ""
            grants.append(Grant(_grantee(kind, grantee, known), perm))
    return Acl(owner, _limited(grants))


def _grantee(kind: str, value: str, known: Callable[[str], bool]) -> str:
    if kind == "emailaddress":
        raise UnresolvableGrantByEmailAddress()
    if kind == "uri":
        if value not in KNOWN_GROUPS:
            raise InvalidArgument("Invalid group uri")
        return value
    if not _CANONICAL_ID.fullmatch(value) or not known(value):
        raise InvalidArgument("Invalid id")
    return value


def _limited(grants: list[Grant]) -> tuple[Grant, ...]:
    unique = tuple(dict.fromkeys(grants))
    if len(unique) > MAX_GRANTS:
        raise MalformedACLError(f"An ACL may hold at most {MAX_GRANTS} grants.")
    return unique


# -- the AccessControlPolicy document ----------------------------------------------------


def to_xml(acl: Acl, name_of: Callable[[str], str | None]) -> list[str]:
    """The parts of an ``AccessControlPolicy`` document (GetBucketAcl, GetObjectAcl)."""
    items = []
    for grant in acl.grants:
        if grant.is_group:
            grantee = (f'<Grantee xmlns:xsi="{XSI}" xsi:type="Group">'
                       f"{el('URI', grant.grantee)}</Grantee>")
        else:
            display = name_of(grant.grantee)
            grantee = (f'<Grantee xmlns:xsi="{XSI}" xsi:type="CanonicalUser">'
                       f"{el('ID', grant.grantee)}"
                       f"{el('DisplayName', display) if display else ''}</Grantee>")
        items.append(f"<Grant>{grantee}{el('Permission', grant.permission.value)}</Grant>")
    return [owner_xml(acl.owner, name_of),
            f"<AccessControlList>{''.join(items)}</AccessControlList>"]


def owner_xml(owner: str, name_of: Callable[[str], str | None]) -> str:
    display = name_of(owner)
    return f"<Owner>{el('ID', owner)}{el('DisplayName', display) if display else ''}</Owner>"


def from_xml(document: bytes, *, known: Callable[[str], bool]) -> Acl:
    """The ACL of a PutBucketAcl / PutObjectAcl body; MalformedACLError if it is not an
    AccessControlPolicy, InvalidArgument for an unknown grantee."""
    try:
        root = parse(document, "AccessControlPolicy")
    except MalformedXML:
        raise MalformedACLError() from None
    owner_id = _child_text(root.find("Owner"), "ID")
    acl_list = root.find("AccessControlList")
    if owner_id is None or acl_list is None:
        raise MalformedACLError()
    grants = []
    for node in acl_list:
        if node.tag != "Grant":
            raise MalformedACLError()
        grantee, permission = node.find("Grantee"), _child_text(node, "Permission")
        if grantee is None or permission is None:
            raise MalformedACLError()
        try:
            perm = Permission(permission)
        except ValueError:
            raise MalformedACLError() from None
        grants.append(Grant(_xml_grantee(grantee, known), perm))
    return Acl(owner_id, _limited(grants))


def _xml_grantee(node: Element, known: Callable[[str], bool]) -> str:
    kind = next((v for k, v in node.attrib.items() if k == f"{{{XSI}}}type"
                 or k.endswith("}type") or k == "type"), None)
    if kind == "CanonicalUser":
        value = _child_text(node, "ID")
        if value is None:
            raise MalformedACLError()
        return _grantee("id", value, known)
    if kind == "Group":
        value = _child_text(node, "URI")
        if value is None:
            raise MalformedACLError()
        return _grantee("uri", value, known)
    if kind == "AmazonCustomerByEmail":
        return _grantee("emailaddress", "", known)
    raise MalformedACLError()


def _child_text(node: Element | None, tag: str) -> str | None:
    if node is None:
        return None
    child = node.find(tag)
    return None if child is None else (child.text or "").strip()
