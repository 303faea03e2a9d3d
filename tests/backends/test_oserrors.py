"""OSError translation at the edge of the posix backend."""

from __future__ import annotations

import errno

import pytest

from backends.core.errors import BackendError, KeyTooLong, NoSuchKey, PreconditionFailed, SlowDown
from backends.oserrors import os_errors


def test_enoent_becomes_the_missing_error() -> None:
    missing = NoSuchKey("b", "k")
    with pytest.raises(NoSuchKey) as caught, os_errors("GetObject", missing=missing):
        raise FileNotFoundError(errno.ENOENT, "gone")
    assert caught.value is missing
    assert isinstance(caught.value.__cause__, FileNotFoundError)


def test_enoent_without_context_is_a_backend_error() -> None:
    with pytest.raises(BackendError, match="GetObject"), os_errors("GetObject"):
        raise FileNotFoundError(errno.ENOENT, "gone")


@pytest.mark.parametrize(("code", "error", "words"), [
    (errno.ENAMETOOLONG, KeyTooLong, "too long"),
    (errno.ENOSPC, SlowDown, "no space"),
    (errno.EDQUOT, SlowDown, "no space"),
    (errno.EACCES, BackendError, "refused access"),
    (errno.EROFS, BackendError, "refused access"),
    (errno.EIO, BackendError, "EIO"),
])
def test_errno_mapping(code: int, error: type[Exception], words: str) -> None:
    with (pytest.raises(error, match=words) as caught,
          os_errors("PutObject", missing=NoSuchKey("b", "k"))):
        raise OSError(code, "boom")
    assert isinstance(caught.value.__cause__, OSError)


def test_storage_errors_and_others_pass_through() -> None:
    with pytest.raises(PreconditionFailed), os_errors("PutObject"):
        raise PreconditionFailed()
    with pytest.raises(ValueError), os_errors("PutObject"):
        raise ValueError("not an OSError")
