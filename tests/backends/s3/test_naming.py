"""Where Squall buckets and keys live upstream (no server needed)."""

from __future__ import annotations

import pytest

from backends.core.errors import InvalidKey
from backends.s3.naming import Naming


def test_shared_markers_sit_apart_from_every_bucket_prefix() -> None:
    naming = Naming("store", "sq/")
    assert naming.marker("ckpt") == "sq/.squall/buckets/ckpt"
    assert naming.locate("ckpt").key("rank0/step0") == "sq/ckpt/rank0/step0"
    assert naming.bucket_of_marker("sq/.squall/buckets/ckpt") == "ckpt"
    for key in ("sq/ckpt", "sq/ckpt/x", "sq/.squall/buckets/", "other/.squall/buckets/b"):
        assert naming.bucket_of_marker(key) is None


def test_first_layout_markers_are_recognised() -> None:
    naming = Naming("store", "sq/")
    assert naming.legacy_marker("ckpt") == "sq/ckpt"
    assert naming.bucket_of_legacy_marker("sq/ckpt") == "ckpt"
    for key in ("sq/ckpt/x", "sq/.squall", "sq/", "ckpt"):
        assert naming.bucket_of_legacy_marker(key) is None


@pytest.mark.parametrize("key", [".squall-internal", ".squall-internal/x"])
def test_keys_of_the_internal_prefix_are_refused(key: str) -> None:
    with pytest.raises(InvalidKey):
        Naming("store").locate("b").key(key)
    assert Naming("store").locate("b").key(".squall-internals") == "b/.squall-internals"
