"""``fuse_op``: every exception of a FUSE operation leaves as ``FuseOSError(errno)``, through
the one table of :func:`gateway.fuse_mount.errors.errno_for`."""

from __future__ import annotations

import errno
import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from backends.core.errors import StorageError
from gateway.fuse_mount.binding import mfusepy
from gateway.fuse_mount.errors import UploadFailed, describe, errno_for

log = logging.getLogger("gateway.fuse_mount.operations")
P = ParamSpec("P")
R = TypeVar("R")


def fuse_op(method: Callable[P, R]) -> Callable[P, R]:
    """Turn any exception into ``FuseOSError(errno)``. A storage error is expected (the
    errno tells the program; an open file's failed upload is reported once by the file):
    one line at debug level. Anything else is a bug: logged with its traceback."""
    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except mfusepy.FuseOSError:
            raise
        except Exception as exc:
            number = errno_for(exc)
            if isinstance(exc, StorageError):
                if not isinstance(exc, UploadFailed):
                    log.debug("%s%r failed: %s", method.__name__, args[1:2], describe(exc))
            elif not isinstance(exc, OSError) and number == errno.EIO:
                log.exception("%s%r failed", method.__name__, args[1:2])
            raise mfusepy.FuseOSError(number) from exc
    return wrapper
