"""Property tests of the XML request documents: tagging, lifecycle and CORS round-trip or
fail with an S3 error, whatever the tree, the text or the bytes.

CompleteMultipartUpload, DeleteObjects and PutBucketVersioning documents are read inside
their handlers; test_wire_fuzz_e2e.py sends generated ones to a real gateway.
"""

from __future__ import annotations

import datetime

from hypothesis import example, given
from hypothesis import strategies as st

from gateway.lifecycle.rules import Filter, Rule
from gateway.protocol.xml import document, el, esc, parse
from gateway.s3api import checksum_headers
from gateway.s3api.handlers import cors, lifecycle
from gateway.s3api.tagging import parse_tagging, tag_set_xml
from tests.gateway.s3api.fuzz.common import UNIT, only_s3_errors

#: characters XML 1.0 can carry in text (no controls, surrogates or non-characters)
XML_TEXT = st.text(st.characters(exclude_categories=["Cc", "Cs", "Cn", "Co"]), max_size=20)
TRIMMED = XML_TEXT.map(str.strip)


@UNIT
@given(st.dictionaries(TRIMMED.filter(bool), XML_TEXT, max_size=12))
def test_tag_sets_round_trip(tags: dict[str, str]) -> None:
    assert parse_tagging(document("Tagging", [tag_set_xml(tags)])) == tags


SIZES = st.integers(min_value=0, max_value=2**62)
TAG = st.tuples(TRIMMED.filter(bool).map(lambda s: s[:128]), XML_TEXT)


def _and_filter(prefix: str, tags: list[tuple[str, str]], gt: int | None,
                lt: int | None) -> Filter:
    return Filter(form="and", prefix=prefix, tags=tuple(dict(tags).items()),
                  size_greater_than=gt, size_less_than=lt)


FILTERS = st.one_of(
    st.builds(Filter, form=st.just("empty")),
    st.builds(Filter, form=st.sampled_from(["prefix", "legacy"]), prefix=XML_TEXT),
    st.builds(lambda t: Filter(form="tag", tags=(t,)), TAG),
    st.builds(Filter, form=st.just("gt"), size_greater_than=SIZES),
    st.builds(Filter, form=st.just("lt"), size_less_than=SIZES),
    st.builds(_and_filter, TRIMMED.filter(bool), st.lists(TAG, min_size=1, max_size=3),
              st.none(), st.none()),
    st.builds(lambda gt, d: _and_filter("", [], gt, gt + d), SIZES, st.integers(1, 10**6)))


def _date(day: datetime.date) -> tuple[str, float]:
    moment = datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z"), moment.timestamp()


@st.composite
def rules(draw: st.DrawFn) -> Rule:
    rule_filter = draw(FILTERS)
    action = draw(st.sampled_from(["days", "date", "marker", "noncurrent", "abort"]))
    fields: dict[str, object] = {}
    if action == "days":
        fields["expiration_days"] = draw(st.integers(1, 10**9))
    elif action == "date":
        day = draw(st.dates(datetime.date(1971, 1, 1), datetime.date(9999, 12, 31)))
        fields["expiration_date"], fields["expiration_date_epoch"] = _date(day)
    elif action == "marker" and not rule_filter.tags:
        fields["expired_object_delete_marker"] = draw(st.booleans())
    elif action == "abort" and not rule_filter.tags:
        fields["abort_days"] = draw(st.integers(1, 10**9))
    else:
        fields["noncurrent_days"] = draw(st.integers(1, 10**9))
        fields["newer_noncurrent_versions"] = draw(st.one_of(st.none(), st.integers(1, 100)))
    ident = draw(TRIMMED.filter(bool).map(lambda s: s[:255]))
    return Rule(id=ident, enabled=draw(st.booleans()), filter=rule_filter,
                **fields)  # type: ignore[arg-type]


@UNIT
@given(st.lists(rules(), min_size=1, max_size=4, unique_by=lambda r: r.id))
def test_lifecycle_rules_round_trip(written: list[Rule]) -> None:
    doc = document("LifecycleConfiguration", [lifecycle.rule_xml(r) for r in written])
    assert lifecycle.parse_rules(doc) == written


# --- arbitrary trees ---------------------------------------------------------------------------

TAGS = ["Tagging", "TagSet", "Tag", "Key", "Value", "LifecycleConfiguration", "Rule", "ID",
        "Status", "Filter", "Prefix", "And", "ObjectSizeGreaterThan", "ObjectSizeLessThan",
        "Expiration", "Days", "Date", "ExpiredObjectDeleteMarker", "NoncurrentDays",
        "NoncurrentVersionExpiration", "NewerNoncurrentVersions", "DaysAfterInitiation",
        "AbortIncompleteMultipartUpload", "Transition", "CORSConfiguration", "CORSRule",
        "AllowedOrigin", "AllowedMethod", "AllowedHeader", "ExposeHeader", "MaxAgeSeconds",
        "Part", "PartNumber", "ETag", "ChecksumCRC32", "ChecksumSHA256", "Other"]
VALUES = st.one_of(
    XML_TEXT,
    st.sampled_from(["Enabled", "Disabled", "true", "false", "GET", "PUT", "*", "**", "0", "-1",
                     "1", "+5", "²", "١٢", "9" * 5000, "2024-01-01", "2024-01-01T00:00:00Z",
                     "2024-02-30T00:00:00.000Z", "2024-01-01T10:00:00+00:00", "10000-01-01",
                     "0000-00-00", " 5 ", "1e3", "0x10", "a" * 300]),
    st.integers().map(str))


def _render(tree: object) -> str:
    tag, children = tree  # type: ignore[misc]
    if isinstance(children, str):
        return el(tag, children)
    return f"<{tag}>{''.join(_render(c) for c in children)}</{tag}>"


TREES = st.recursive(st.tuples(st.sampled_from(TAGS), VALUES),
                     lambda inner: st.tuples(st.sampled_from(TAGS),
                                             st.lists(inner, max_size=5)),
                     max_leaves=25)
ROOTS = ["Tagging", "LifecycleConfiguration", "CORSConfiguration", "CompleteMultipartUpload"]


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    root = draw(st.sampled_from(ROOTS))
    body = "".join(_render(t) for t in draw(st.lists(TREES, max_size=4)))
    namespace = draw(st.booleans())
    return document(root, [body], namespace=namespace)


def _parse_everything(doc: bytes) -> None:
    for parser in (parse_tagging, lifecycle.parse_rules, cors.parse_rules):
        with only_s3_errors():
            parser(doc)
    with only_s3_errors():
        root = parse(doc, "CompleteMultipartUpload")
        for part in root.findall("Part"):
            checksum_headers.part_checksums(part)


@UNIT
@given(documents())
@example(b"<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag>"
         b"<Tag><Key>k</Key><Value>w</Value></Tag></TagSet></Tagging>")
@example(b"<LifecycleConfiguration><Rule><Status>Enabled</Status><Filter/><Expiration>"
         b"<Days>" + b"9" * 5000 + b"</Days></Expiration></Rule></LifecycleConfiguration>")
@example(b"<LifecycleConfiguration><Rule><Status>Enabled</Status><Filter/><Expiration>"
         b"<Date>99999-01-01T00:00:00Z</Date></Expiration></Rule></LifecycleConfiguration>")
@example(b"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET"
         b"</AllowedMethod><MaxAgeSeconds>\xc2\xb2</MaxAgeSeconds></CORSRule>"
         b"</CORSConfiguration>")
def test_generated_documents_parse_or_fail_with_s3_errors(doc: bytes) -> None:
    _parse_everything(doc)


@UNIT
@given(st.one_of(st.binary(max_size=200), XML_TEXT.map(lambda s: f"<{s}>".encode()),
                 st.builds(lambda r, s: f"<{r}>{s}</{r}>".encode(), st.sampled_from(ROOTS),
                           st.text(max_size=40))))
@example(b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><Tagging>&a;</Tagging>')
@example(b'<!DOCTYPE x SYSTEM "file:///etc/passwd"><Tagging/>')
@example(b"<Tagging xmlns:x='u'><x:TagSet/></Tagging>")
@example(b"\xff\xfe<\x00T\x00")
def test_arbitrary_bytes_are_malformed_xml_or_parsed(doc: bytes) -> None:
    _parse_everything(doc)


@UNIT
@given(XML_TEXT)
def test_escaped_text_reads_back(value: str) -> None:
    doc = document("Tagging", [(f"<TagSet><Tag>{el('Key', 'k')}<Value>{esc(value)}</Value>"
                               "</Tag></TagSet>")])
    assert parse_tagging(doc) == {"k": value}
