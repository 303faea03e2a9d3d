"""OSError -> typed storage errors, in one place at the edge of the local-disk backends."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

from backends.core.errors import BackendError, KeyTooLong, SlowDown, StorageError

_NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
_DENIED = {errno.EACCES, errno.EPERM, errno.EROFS}
#: seconds a writer refused for lack of space is asked to wait (Retry-After)
NO_SPACE_RETRY_AFTER_S = 5


@contextmanager
def os_errors(operation: str, *, missing: StorageError | None = None) -> Iterator[None]:
    """Raise the storage error for an OSError escaping the block, ``from`` the OSError.

    ENOENT becomes ``missing`` when given (the NoSuch* the caller expects), ENAMETOOLONG
    KeyTooLong, ENOSPC/EDQUOT SlowDown (retry later: space may be freed), and everything
    else a BackendError naming the operation and the cause.
    """
    try:
        yield
    except StorageError:
        raise
    except OSError as exc:
        raise translate(exc, operation, missing=missing) from exc


def translate(exc: OSError, operation: str, *,
              missing: StorageError | None = None) -> StorageError:
    """The storage error that stands for ``exc``."""
    code = exc.errno
    if code == errno.ENOENT and missing is not None:
        return missing
    if code == errno.ENAMETOOLONG:
        return KeyTooLong("The key is too long for the backend file system.")
    if code in _NO_SPACE:
        return SlowDown(f"{operation}: no space left on the backend file system.",
                        retry_after=NO_SPACE_RETRY_AFTER_S)
    if code in _DENIED:
        return BackendError(f"{operation}: the backend file system refused access "
                            f"({errno.errorcode.get(code, code)}).")
    name = errno.errorcode.get(code, str(code)) if code is not None else "unknown"
    return BackendError(f"{operation}: file system error {name}: {exc.strerror or exc}.")
