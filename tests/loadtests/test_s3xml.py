from __future__ import annotations

from loadtests.s3xml import ListEntry, error_code, parse_list_v2

LIST = b"""<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <NextContinuationToken>tok+en/=</NextContinuationToken>
  <Contents><Key>p/a</Key><Size>10</Size><ETag>"e1"</ETag></Contents>
  <Contents><Key>p/b c</Key><Size>0</Size><ETag>"e2"</ETag></Contents>
</ListBucketResult>"""


def test_parse_list_v2() -> None:
    page = parse_list_v2(LIST)
    assert page.entries == [ListEntry("p/a", 10, '"e1"'), ListEntry("p/b c", 0, '"e2"')]
    assert page.truncated is True
    assert page.token == "tok+en/="


def test_parse_last_page() -> None:
    page = parse_list_v2(b"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>")
    assert (page.entries, page.truncated, page.token) == ([], False, None)


def test_error_code() -> None:
    body = b"<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>"
    assert error_code(body) == "NoSuchKey"
    assert error_code(b"") == ""
    assert error_code(b"not xml") == ""
