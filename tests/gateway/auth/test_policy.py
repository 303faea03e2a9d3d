"""Bucket policies: parsing (S3's MalformedPolicy messages), the wildcard matcher, each
condition operator and key, principals, and the evaluation order."""

from __future__ import annotations

import asyncio
import fnmatch
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backends.core.errors import BackendError
from backends.posix.backend import PosixBackend
from gateway.auth.policy import (
    BucketPolicy,
    Decision,
    MalformedPolicy,
    PolicyRequest,
    bucket_policy,
    parse_policy,
)
from gateway.auth.policy.wildcard import compile_wildcard
from gateway.auth.users import User
from gateway.service.bucket_config import BucketConfigs

B = "photos"
ALICE = User("alice", "AKALICE", "a" * 40, "a1" * 32)
BOB = User("bob", "AKBOB", "b" * 40, "b2" * 32)
OBJECTS = f"arn:aws:s3:::{B}/*"
BUCKET = f"arn:aws:s3:::{B}"


def stmt(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                            "Resource": OBJECTS}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def policy(*statements: dict[str, Any], **top: Any) -> BucketPolicy:
    doc = {"Version": "2012-10-17", "Statement": list(statements), **top}
    return parse_policy(json.dumps(doc).encode(), B)


def req(user: User | None = ALICE, action: str = "s3:GetObject", key: str | None = "k",
        ip: str = "192.0.2.7", secure: bool = False, prefix: str | None = None,
        bucket: str = B) -> PolicyRequest:
    return PolicyRequest(user, action, bucket, key, ip, secure, prefix)


def malformed(text: bytes | str | dict[str, Any], bucket: str = B) -> str:
    raw = text if isinstance(text, bytes) else (
        text.encode() if isinstance(text, str) else json.dumps(text).encode())
    with pytest.raises(MalformedPolicy) as exc:
        parse_policy(raw, bucket)
    return exc.value.message


# -- parsing ---------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    (b"", "first byte must be '{'"),
    (b"[1]", "first byte must be '{'"),
    (b"{\"Statement\": ", "invalid Json"),
    (b"\xff{}", "invalid Json"),
    (b'{"Statement": [], "Statement": []}', "already has instance of Statement"),
    (b'{"Version": "2012-10-17"}', "Missing required field Statement"),
    (b'{"Statement": []}', "Statement is empty"),
    (b'{"Version": "2020-01-01", "Statement": {}}', "valid version string"),
    (b'{"Statement": [], "Extra": 1}', "Unknown field Extra"),
])
def test_document_errors(text: bytes, message: str) -> None:
    assert message in malformed(text)


@pytest.mark.parametrize(("fields", "message"), [
    ({"Effect": None}, "Missing required field Effect"),
    ({"Effect": "Maybe"}, "Invalid effect: Maybe"),
    ({"Principal": None}, "Missing required field Principal"),
    ({"Action": None}, "Missing required field Action"),
    ({"Resource": None}, "Missing required field Resource"),
    ({"NotAction": "s3:PutObject"}, "already has instance of Action"),
    ({"Effects": "Allow"}, "Unknown field Effects"),
    ({"Action": "s3:GetObjekt"}, "Policy has invalid action"),
    ({"Action": "s3:Fly*"}, "Policy has invalid action"),
    ({"Action": "iam:GetUser"}, "Policy has invalid action"),
    ({"Action": []}, "cannot be empty"),
    ({"Action": 7}, "Invalid policy syntax."),
    ({"Resource": "arn:aws:s3:::other/*"}, "Policy has invalid resource"),
    ({"Resource": "*"}, "Policy has invalid resource"),
    ({"Resource": "photos/*"}, "Policy has invalid resource"),
    ({"Resource": f"arn:aws:s3:::{B}/home/${{aws:PrincipalTag/team}}/*"},
     "unsupported variable"),
    ({"Resource": "arn:aws:s3:::${aws:username}/*"}, "Policy has invalid resource"),
    ({"Action": "s3:PutObject", "Resource": BUCKET},
     "Action does not apply to any resource(s) in statement"),
    ({"Action": "s3:ListBucket", "Resource": OBJECTS},
     "Action does not apply to any resource(s) in statement"),
    ({"Principal": {"Service": "cloudfront.amazonaws.com"}}, "Invalid principal in policy"),
    ({"Principal": {"AWS": "arn:aws:iam::123456789012:root"}}, "Invalid principal"),
    ({"Principal": {"AWS": "arn:aws:iam::123456789012:role/r"}}, "Invalid principal"),
    ({"Principal": {"AWS": "al ice"}}, "Invalid principal in policy"),
    ({"Principal": {"CanonicalUser": "abc"}}, "Invalid principal in policy"),
    ({"Principal": {}}, "Invalid principal in policy"),
    ({"Principal": "someone"}, "Invalid principal in policy"),
    ({"Condition": {"StringFuzzy": {"s3:prefix": "a"}}}, "Invalid Condition type : StringFuzzy"),
    ({"Condition": {"Foo:StringLike": {"s3:prefix": "a"}}}, "Invalid Condition type"),
    ({"Condition": {"NullIfExists": {"s3:prefix": "true"}}}, "Invalid Condition type"),
    ({"Condition": {"StringLike": {"aws:Referer": "a"}}}, "invalid condition key"),
    ({"Condition": {"StringLike": {"aws:SourceIp": "a"}}}, "cannot be used with"),
    ({"Condition": {"IpAddress": {"aws:SourceIp": "169.254.0.300/16"}}}, "IP addresses"),
    ({"Condition": {"Bool": {"aws:SecureTransport": "yes"}}}, "true or false"),
    ({"Condition": {"StringEquals": {"s3:prefix": {"a": 1}}}}, "Invalid policy syntax."),
    ({"Condition": ["x"]}, "Invalid policy syntax."),
])
def test_statement_errors(fields: dict[str, Any], message: str) -> None:
    assert message in malformed({"Version": "2012-10-17", "Statement": [stmt(**fields)]})


def test_duplicate_sids_and_size_limit() -> None:
    assert "unique" in malformed({"Statement": [stmt(Sid="a"), stmt(Sid="a")]})
    many = [stmt(Sid=f"s{i}", Action="s3:GetObject") for i in range(300)]
    assert "maximum allowed document size" in malformed({"Statement": many})
    # The limit is on the document without its whitespace, as S3 measures it.
    few = json.dumps({"Statement": many[:150]}, indent=8).encode()
    assert len(few) > 20 * 1024
    parse_policy(few, B)


def test_accepted_forms_and_text_kept() -> None:
    text = ('{"Id": "x", "Statement": {"Sid": "one", "Effect": "Deny", '
            '"NotPrincipal": {"AWS": ["bob"]}, "NotAction": "s3:Get*", '
            f'"NotResource": ["{BUCKET}"]}}}}   ')
    parsed = parse_policy(text.encode(), B)
    assert parsed.text == text and parsed.id == "x" and parsed.version is None
    # Wildcards in the bucket part are accepted when they can name this bucket.
    policy(stmt(Resource="arn:aws:s3:::pho*"), Version="2008-10-17")
    policy(stmt(Action="*", Resource=[BUCKET, OBJECTS]))
    policy(stmt(Action="S3:LISTBUCKET", Resource=BUCKET))


# -- wildcards -------------------------------------------------------------------------

@pytest.mark.parametrize(("pattern", "text", "hit"), [
    ("a*c", "abc/de:fc", True), ("a?c", "abc", True), ("a?c", "ac", False),
    ("[ab]", "a", False), ("[ab]", "[ab]", True), ("a.c", "abc", False), ("*", "", True),
    ("x**y", "xy", True), ("a\\*", "a\\zz", True),
])
def test_wildcard_cases(pattern: str, text: str, hit: bool) -> None:
    assert (compile_wildcard(pattern).fullmatch(text) is not None) is hit


_ALPHABET = st.text(alphabet="ab/*?.[]\\", max_size=8)


@given(pattern=_ALPHABET, text=st.text(alphabet="ab/.[]\\*?", max_size=10))
def test_wildcard_agrees_with_a_reference(pattern: str, text: str) -> None:
    # fnmatch without character classes, with "[" escaped, is the same language.
    reference = fnmatch.translate(pattern.replace("[", "\x00")).replace("\x00", r"\[")
    expected = re.fullmatch(reference, text, re.DOTALL) is not None
    assert (compile_wildcard(pattern).fullmatch(text) is not None) is expected


# -- evaluation ------------------------------------------------------------------------

def test_deny_wins_over_allow_and_default_is_none() -> None:
    p = policy(stmt(Action="s3:*"), stmt(Effect="Deny", Principal={"AWS": "alice"},
                                         Action="s3:GetObject"))
    assert p.evaluate(req(ALICE)) is Decision.DENY
    assert p.evaluate(req(BOB)) is Decision.ALLOW
    assert p.evaluate(req(None)) is Decision.ALLOW
    assert policy(stmt(Principal={"AWS": "bob"})).evaluate(req(ALICE)) is Decision.NONE


def test_actions_are_case_insensitive_with_wildcards() -> None:
    p = policy(stmt(Action=["s3:get*", "s3:ListBucket"], Resource=[BUCKET, OBJECTS]))
    assert p.evaluate(req(action="s3:GetObjectTagging")) is Decision.ALLOW
    assert p.evaluate(req(action="s3:ListBucket", key=None)) is Decision.ALLOW
    assert p.evaluate(req(action="s3:PutObject")) is Decision.NONE


def test_resources() -> None:
    p = policy(stmt(Resource=f"arn:aws:s3:::{B}/public/*"))
    assert p.evaluate(req(key="public/a/b.jpg")) is Decision.ALLOW
    assert p.evaluate(req(key="private/a.jpg")) is Decision.NONE
    assert p.evaluate(req(key="Public/a.jpg")) is Decision.NONE  # case matters
    assert p.evaluate(req(key=None)) is Decision.NONE  # the bucket is not an object
    one = policy(stmt(Resource=f"arn:aws:s3:::{B}/a?c"))
    assert one.evaluate(req(key="abc")) is Decision.ALLOW
    assert one.evaluate(req(key="abbc")) is Decision.NONE


def test_not_action_and_not_resource() -> None:
    p = policy(stmt(Effect="Deny", Action=None, NotAction="s3:GetObject", Resource=None,
                    NotResource=f"arn:aws:s3:::{B}/keep/*"))
    assert p.evaluate(req(action="s3:DeleteObject", key="x")) is Decision.DENY
    assert p.evaluate(req(action="s3:DeleteObject", key="keep/x")) is Decision.NONE
    assert p.evaluate(req(action="s3:GetObject", key="x")) is Decision.NONE


def test_principal_forms() -> None:
    for principal in ({"AWS": "arn:aws:iam::123456789012:user/alice"},
                      {"AWS": "arn:aws:iam::000000000000:user/team/alice"},
                      {"AWS": ["carol", "alice"]},
                      {"CanonicalUser": ALICE.canonical_id.upper()}):
        p = policy(stmt(Principal=principal))
        assert p.evaluate(req(ALICE)) is Decision.ALLOW, principal
        assert p.evaluate(req(BOB)) is Decision.NONE, principal
        assert p.evaluate(req(None)) is Decision.NONE, principal
    for everyone in ("*", {"AWS": "*"}, {"AWS": ["bob", "*"]}):
        assert policy(stmt(Principal=everyone)).evaluate(req(None)) is Decision.ALLOW
    not_alice = policy(stmt(Effect="Deny", Principal=None, NotPrincipal={"AWS": "alice"}))
    assert not_alice.evaluate(req(ALICE)) is Decision.NONE
    assert not_alice.evaluate(req(BOB)) is Decision.DENY
    assert not_alice.evaluate(req(None)) is Decision.DENY


def test_source_ip() -> None:
    p = policy(stmt(Condition={"IpAddress": {"aws:SourceIp": ["169.254.0.0/16", "2001:db8::/32",
                                                             "192.0.2.7"]}}))
    assert p.evaluate(req(ip="169.254.8.7")) is Decision.ALLOW
    assert p.evaluate(req(ip="192.0.2.7")) is Decision.ALLOW
    assert p.evaluate(req(ip="192.0.2.8")) is Decision.NONE
    assert p.evaluate(req(ip="2001:db8::1")) is Decision.ALLOW
    assert p.evaluate(req(ip="2001:db9::1")) is Decision.NONE
    assert p.evaluate(req(ip="::ffff:169.254.1.1")) is Decision.ALLOW  # IPv4-mapped
    assert p.evaluate(req(ip="")) is Decision.NONE  # no address: the key is missing
    deny = policy(stmt(Effect="Deny", Condition={"NotIpAddress": {"aws:sourceip": "169.254.0.0/16"}}))
    assert deny.evaluate(req(ip="198.51.100.1")) is Decision.DENY
    assert deny.evaluate(req(ip="169.254.0.1")) is Decision.NONE
    assert deny.evaluate(req(ip="unix")) is Decision.DENY  # negated: a missing key matches


def test_secure_transport() -> None:
    deny = policy(stmt(Effect="Deny", Action="s3:*",
                       Condition={"Bool": {"aws:SecureTransport": "false"}}))
    assert deny.evaluate(req(secure=False)) is Decision.DENY
    assert deny.evaluate(req(secure=True)) is Decision.NONE
    allow = policy(stmt(Condition={"Bool": {"aws:SecureTransport": True}}))
    assert allow.evaluate(req(secure=True)) is Decision.ALLOW


def test_string_operators_on_prefix() -> None:
    list_ = {"Action": "s3:ListBucket", "Resource": BUCKET}

    def list_req(prefix: str | None) -> PolicyRequest:
        return req(action="s3:ListBucket", key=None, prefix=prefix)

    eq = policy(stmt(**list_, Condition={"StringEquals": {"s3:prefix": ["", "home/"]}}))
    assert eq.evaluate(list_req("home/")) is Decision.ALLOW
    assert eq.evaluate(list_req("")) is Decision.ALLOW
    assert eq.evaluate(list_req("Home/")) is Decision.NONE
    assert eq.evaluate(list_req(None)) is Decision.NONE  # missing key fails a positive test
    like = policy(stmt(**list_, Condition={"StringLike": {"s3:prefix": "home/*"}}))
    assert like.evaluate(list_req("home/alice/")) is Decision.ALLOW
    assert like.evaluate(list_req("work/")) is Decision.NONE
    not_like = policy(stmt(**list_, Condition={"StringNotLike": {"s3:prefix": "secret*"}}))
    assert not_like.evaluate(list_req("public")) is Decision.ALLOW
    assert not_like.evaluate(list_req("secret/x")) is Decision.NONE
    assert not_like.evaluate(list_req(None)) is Decision.ALLOW  # negated: missing matches
    ne = policy(stmt(**list_, Condition={"StringNotEquals": {"s3:prefix": ["a", "b"]}}))
    assert ne.evaluate(list_req("a")) is Decision.NONE
    assert ne.evaluate(list_req("c")) is Decision.ALLOW
    icase = policy(stmt(**list_, Condition={"StringEqualsIgnoreCase": {"s3:prefix": "Home/"}}))
    assert icase.evaluate(list_req("HOME/")) is Decision.ALLOW


def test_user_keys_and_if_exists() -> None:
    by_name = policy(stmt(Condition={"StringEquals": {"aws:username": "alice"}}))
    assert by_name.evaluate(req(ALICE)) is Decision.ALLOW
    assert by_name.evaluate(req(BOB)) is Decision.NONE
    assert by_name.evaluate(req(None)) is Decision.NONE
    by_id = policy(stmt(Condition={"StringEquals": {"aws:userid": [BOB.canonical_id,
                                                                   "anonymous"]}}))
    assert by_id.evaluate(req(BOB)) is Decision.ALLOW
    assert by_id.evaluate(req(None)) is Decision.ALLOW
    assert by_id.evaluate(req(ALICE)) is Decision.NONE
    if_exists = policy(stmt(Condition={"StringEqualsIfExists": {"aws:username": "alice"}}))
    assert if_exists.evaluate(req(None)) is Decision.ALLOW
    assert if_exists.evaluate(req(BOB)) is Decision.NONE
    null = policy(stmt(Condition={"Null": {"aws:username": "true"}}))
    assert null.evaluate(req(None)) is Decision.ALLOW
    assert null.evaluate(req(ALICE)) is Decision.NONE


def test_set_qualifiers() -> None:
    any_ = policy(stmt(Condition={"ForAnyValue:StringEquals": {"aws:username": "alice"}}))
    assert any_.evaluate(req(ALICE)) is Decision.ALLOW
    assert any_.evaluate(req(None)) is Decision.NONE
    all_ = policy(stmt(Condition={"ForAllValues:StringEquals": {"aws:username": "alice"}}))
    assert all_.evaluate(req(ALICE)) is Decision.ALLOW
    assert all_.evaluate(req(BOB)) is Decision.NONE
    assert all_.evaluate(req(None)) is Decision.ALLOW  # no values: vacuously true


def test_conditions_are_anded_values_ored() -> None:
    p = policy(stmt(Condition={"IpAddress": {"aws:SourceIp": ["169.254.0.0/16", "192.0.2.0/24"]},
                               "Bool": {"aws:SecureTransport": "true"}}))
    assert p.evaluate(req(ip="192.0.2.1", secure=True)) is Decision.ALLOW
    assert p.evaluate(req(ip="192.0.2.1", secure=False)) is Decision.NONE
    assert p.evaluate(req(ip="8.8.8.8", secure=True)) is Decision.NONE


# -- public ----------------------------------------------------------------------------

@pytest.mark.parametrize(("statement", "public"), [
    (stmt(), True),
    (stmt(Principal={"AWS": "*"}), True),
    (stmt(Principal={"AWS": "alice"}), False),
    (stmt(Effect="Deny"), False),
    (stmt(Principal=None, NotPrincipal={"AWS": "alice"}), True),
    (stmt(Condition={"IpAddress": {"aws:SourceIp": "169.254.0.0/16"}}), False),
    (stmt(Condition={"IpAddress": {"aws:SourceIp": "0.0.0.0/0"}}), True),
    (stmt(Condition={"IpAddress": {"aws:SourceIp": "2001:db8::/32"}}), False),
    (stmt(Condition={"IpAddress": {"aws:SourceIp": "2001::/16"}}), True),
    (stmt(Condition={"NotIpAddress": {"aws:SourceIp": "169.254.0.0/16"}}), True),
    (stmt(Condition={"StringEquals": {"aws:username": "alice"}}), False),
    (stmt(Condition={"StringLike": {"aws:username": "a*"}}), True),
    (stmt(Condition={"StringEquals": {"aws:username": "${aws:username}"}}), True),
    (stmt(Condition={"StringEqualsIfExists": {"aws:username": "alice"}}), True),
    (stmt(Condition={"Bool": {"aws:SecureTransport": "true"}}), True),
])
def test_is_public(statement: dict[str, Any], public: bool) -> None:
    assert policy(statement).is_public is public


# -- the stored document ---------------------------------------------------------------

def test_bucket_policy_is_parsed_once_per_document(tmp_path: Any) -> None:
    async def scenario() -> None:
        backend = PosixBackend(tmp_path)
        await backend.create_bucket(B)
        configs = BucketConfigs(backend, ttl=0.0)
        assert await bucket_policy(configs, B) is None
        text = json.dumps({"Statement": [stmt()]})
        await configs.put(B, "policy", text)
        first = await bucket_policy(configs, B)
        assert first is not None and first.text == text
        assert await bucket_policy(configs, B) is first  # re-read, same text: not re-parsed
        await configs.put(B, "policy", json.dumps({"Statement": [stmt(Effect="Deny")]}))
        second = await bucket_policy(configs, B)
        assert second is not first and second is not None
        assert second.evaluate(req()) is Decision.DENY
        await configs.put(B, "policy", '{"Statement": []}')  # no longer a policy: fail closed
        with pytest.raises(BackendError, match="cannot be read"):
            await bucket_policy(configs, B)
        await configs.delete(B, "policy")
        assert await bucket_policy(configs, B) is None

    asyncio.run(scenario())


def test_policy_variables() -> None:
    home = policy(stmt(Resource=f"arn:aws:s3:::{B}/home/${{aws:username}}/*"))
    assert home.evaluate(req(ALICE, key="home/alice/notes.txt")) is Decision.ALLOW
    assert home.evaluate(req(BOB, key="home/alice/notes.txt")) is Decision.NONE
    assert home.evaluate(req(None, key="home/alice/x")) is Decision.NONE  # no user name
    by_id = policy(stmt(Resource=f"arn:aws:s3:::{B}/${{aws:userid}}/${{*}}"))
    assert by_id.evaluate(req(BOB, key=f"{BOB.canonical_id}/*")) is Decision.ALLOW
    assert by_id.evaluate(req(BOB, key=f"{BOB.canonical_id}/x")) is Decision.NONE
    listing = policy(stmt(Action="s3:ListBucket", Resource=BUCKET, Condition={
        "StringLike": {"s3:prefix": ["home/${aws:username}/*", "${aws:username}"]}}))
    assert listing.evaluate(req(ALICE, "s3:ListBucket", None, prefix="home/alice/a")) \
        is Decision.ALLOW
    assert listing.evaluate(req(ALICE, "s3:ListBucket", None, prefix="alice")) \
        is Decision.ALLOW
    assert listing.evaluate(req(BOB, "s3:ListBucket", None, prefix="home/alice/")) \
        is Decision.NONE
    equals = policy(stmt(Condition={"StringNotEquals": {"aws:username": "${aws:username}"}}))
    assert equals.evaluate(req(ALICE)) is Decision.NONE
    # Before 2012-10-17 there are no variables: the text is literal.
    literal = parse_policy(json.dumps({"Version": "2008-10-17", "Statement": [
        stmt(Resource=f"arn:aws:s3:::{B}/${{aws:username}}")]}).encode(), B)
    assert literal.evaluate(req(ALICE, key="${aws:username}")) is Decision.ALLOW
    assert literal.evaluate(req(ALICE, key="alice")) is Decision.NONE
