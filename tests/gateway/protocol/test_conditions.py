"""Conditional request precedence, as S3 documents it."""

from __future__ import annotations

import pytest

from backends.core.base import ObjectInfo
from backends.core.errors import PreconditionFailed
from gateway.protocol.conditions import Conditions
from gateway.protocol.errors import NotModified

INFO = ObjectInfo("b", "k", 1, "abc", 1000.0)


@pytest.mark.parametrize("conditions,error", [
    (Conditions(if_match='"abc"'), None),
    (Conditions(if_match='"x", "abc"'), None),
    (Conditions(if_match="*"), None),
    (Conditions(if_match='"x"'), PreconditionFailed),
    (Conditions(if_none_match='"abc"'), NotModified),
    (Conditions(if_none_match='"x"'), None),
    (Conditions(if_modified_since=1000.0), NotModified),
    (Conditions(if_modified_since=999.0), None),
    (Conditions(if_unmodified_since=999.0), PreconditionFailed),
    (Conditions(if_unmodified_since=1000.0), None),
    # If-Match true + If-Unmodified-Since false -> 200
    (Conditions(if_match='"abc"', if_unmodified_since=999.0), None),
    # If-None-Match false + If-Modified-Since false -> 200
    (Conditions(if_none_match='"x"', if_modified_since=2000.0), None),
    # If-None-Match true + If-Modified-Since true -> 304
    (Conditions(if_none_match='"abc"', if_modified_since=0.0), NotModified),
])
def test_read_conditions(conditions: Conditions, error: type[Exception] | None) -> None:
    if error is None:
        conditions.check_read(INFO)
    else:
        with pytest.raises(error):
            conditions.check_read(INFO)


def test_copy_source_conditions_are_all_412() -> None:
    with pytest.raises(PreconditionFailed):
        Conditions(if_none_match='"abc"').check_copy_source(INFO)
    with pytest.raises(PreconditionFailed):
        Conditions(if_modified_since=2000.0).check_copy_source(INFO)
