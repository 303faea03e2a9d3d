"""Shared by the fuzz properties: their budget, and the check that a parser fails only with
an S3 error answered as 4xx."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import settings

from backends.core.errors import StorageError
from gateway.protocol.errors import s3_error_for

#: examples per property: the whole fuzz suite stays within seconds (``SQUALL_FUZZ_SEED``
#: explores other examples on other runs)
UNIT = settings(max_examples=150)


@contextmanager
def only_s3_errors() -> Iterator[None]:
    """Let a typed S3 error with a 4xx status pass (or 501 NotImplemented, S3's answer to
    a feature it lacks); anything else fails the test: it would be a 500 on the wire."""
    try:
        yield
    except StorageError as exc:
        spec, _ = s3_error_for(exc)
        assert 400 <= spec.status < 500 or spec.code == "NotImplemented", (spec, exc)
