"""ACL model: canned ACLs, grant headers, the AccessControlPolicy document."""

from __future__ import annotations

import pytest

from gateway.auth.acl import (
    ALL_USERS,
    AUTHENTICATED_USERS,
    Acl,
    Grant,
    canned,
    from_headers,
    from_xml,
    private,
    to_xml,
)
from gateway.auth.actions import Permission
from gateway.protocol.errors import (
    InvalidArgument,
    InvalidRequest,
    MalformedACLError,
    UnresolvableGrantByEmailAddress,
)
from gateway.protocol.xml import document

OWNER, OTHER = "a" * 64, "b" * 64


def known(canonical_id: str) -> bool:
    return canonical_id in (OWNER, OTHER)


def test_canned_acls() -> None:
    assert canned("private", OWNER, OTHER) == private(OWNER)
    assert canned("public-read", OWNER, OWNER).is_public
    rw = canned("public-read-write", OWNER, OWNER)
    assert rw.allows(None, Permission.WRITE) and rw.allows(None, Permission.READ)
    auth = canned("authenticated-read", OWNER, OWNER)
    assert auth.allows(OTHER, Permission.READ) and not auth.allows(None, Permission.READ)
    full = canned("bucket-owner-full-control", OTHER, OWNER)
    assert full.allows(OWNER, Permission.WRITE_ACP)
    assert canned("bucket-owner-read", OTHER, OWNER).allows(OWNER, Permission.READ)
    assert not canned("bucket-owner-read", OTHER, OWNER).allows(OWNER, Permission.WRITE)
    with pytest.raises(InvalidArgument):
        canned("world", OWNER, OWNER)


def test_ignore_public_skips_group_grants() -> None:
    acl = canned("public-read", OWNER, OWNER)
    assert not acl.allows(None, Permission.READ, ignore_public=True)
    assert acl.allows(OWNER, Permission.READ, ignore_public=True)


def test_grant_headers() -> None:
    acl = from_headers({"x-amz-grant-read": f'id="{OTHER}", uri="{ALL_USERS}"',
                        "x-amz-grant-write-acp": f"id={OTHER}"},
                       owner=OWNER, bucket_owner=OWNER, known=known)
    assert acl is not None and acl.owner == OWNER
    assert acl.grants == (Grant(OTHER, Permission.READ), Grant(ALL_USERS, Permission.READ),
                          Grant(OTHER, Permission.WRITE_ACP))
    assert from_headers({}, owner=OWNER, bucket_owner=OWNER, known=known) is None
    for headers, error in (
            ({"x-amz-grant-read": 'emailAddress="x@example.com"'},
             UnresolvableGrantByEmailAddress),
            ({"x-amz-grant-read": 'id="' + "c" * 64 + '"'}, InvalidArgument),
            ({"x-amz-grant-read": 'uri="http://example.com/group"'}, InvalidArgument),
            ({"x-amz-grant-read": "nonsense"}, InvalidArgument),
            ({"x-amz-acl": "private", "x-amz-grant-read": f'id="{OTHER}"'}, InvalidRequest)):
        with pytest.raises(error):
            from_headers(headers, owner=OWNER, bucket_owner=OWNER, known=known)


def test_xml_round_trip() -> None:
    acl = Acl(OWNER, (Grant(OWNER, Permission.FULL_CONTROL),
                      Grant(AUTHENTICATED_USERS, Permission.READ),
                      Grant(OTHER, Permission.READ_ACP)))
    names = {OWNER: "alice", OTHER: "bob"}
    body = document("AccessControlPolicy", to_xml(acl, names.get))
    assert b"<DisplayName>alice</DisplayName>" in body
    assert from_xml(body, known=known) == acl
    assert Acl.decode(acl.encode()) == acl


@pytest.mark.parametrize("body", [
    b"not xml", b"<Other/>", b"<AccessControlPolicy/>",
    (b"<AccessControlPolicy><Owner><ID>x</ID></Owner><AccessControlList><Grant>"
    b"<Permission>READ</Permission></Grant></AccessControlList></AccessControlPolicy>"),
    (b"<AccessControlPolicy><Owner><ID>x</ID></Owner><AccessControlList><Oops/>"
    b"</AccessControlList></AccessControlPolicy>"),
])
def test_malformed_documents(body: bytes) -> None:
    with pytest.raises(MalformedACLError):
        from_xml(body, known=known)
