"""gateway.protocol.xml: escaping of every character XML needs escaped, and ETags."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest

from gateway.protocol.xml import document, el, esc, etag_el


@pytest.mark.parametrize("value", ["plain/key-001", "a&b", "<tag>", "quo\"te", "apos'", "cr\rlf\n",
                                   "&amp; already", "ключ é", 4096, ""])
def test_esc_round_trips_through_an_xml_parser(value: object) -> None:
    parsed = ElementTree.fromstring(document("R", [el("V", value)], namespace=False))
    assert parsed.findtext("V") == str(value)


def test_esc_leaves_plain_text_as_it_is_and_escapes_the_rest() -> None:
    assert esc("plain/key 1") == "plain/key 1"
    assert esc("a&b<c>d\"e'f\rg") == "a&amp;b&lt;c&gt;d&quot;e&apos;f&#13;g"


def test_etag_element_is_quoted_and_escaped() -> None:
    assert etag_el("d41d8cd98f00b204e9800998ecf8427e-2") == \
        "<ETag>&quot;d41d8cd98f00b204e9800998ecf8427e-2&quot;</ETag>"
    parsed = ElementTree.fromstring(document("R", [etag_el("x&y")], namespace=False))
    assert parsed.findtext("ETag") == '"x&y"'


def test_control_characters_are_character_references_as_s3_writes_them() -> None:
    """CR, LF and the control characters XML 1.0 cannot carry become ``&#N;`` (a client
    that may meet the latter in keys asks for ``encoding-type=url``); TAB stays."""
    assert esc("a\nb\tc\x01d\x1fe") == "a&#10;b\tc&#1;d&#31;e"
    parsed = ElementTree.fromstring(document("R", [el("V", "new\nline")], namespace=False))
    assert parsed.findtext("V") == "new\nline"
