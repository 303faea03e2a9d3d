"""mfusepy, always bound to libfuse 3: import it from here (``from ...binding import mfusepy``).

mfusepy looks for ``libfuse.so.2`` before ``libfuse3.so.3``, and libfuse 2 is often installed
next to 3 (Debian's s3fs depends on it). libfuse 2 would silently cost what the mount relies
on: 1 MiB write requests (``max_pages``), renameat2 flags and ``nullpath_ok`` (handles of
unlinked files). mfusepy picks its library once, when first imported, from
``FUSE_LIBRARY_NAME``; that is why this module sets it before importing (unless
``FUSE_LIBRARY_PATH`` names a library explicitly).
"""

from __future__ import annotations

import ctypes
import os

if "FUSE_LIBRARY_PATH" not in os.environ:
    os.environ["FUSE_LIBRARY_NAME"] = "fuse3"

import mfusepy

__all__ = ["current_fuse", "exit_loop", "mfusepy", "require_libfuse3"]


class BindingUnavailable(RuntimeError):
    """The libfuse found is not libfuse 3."""


def require_libfuse3() -> None:
    """Raise :class:`BindingUnavailable` unless mfusepy is bound to libfuse 3."""
    if mfusepy.fuse_version_major != 3:
        raise BindingUnavailable(
            f"libfuse 3 is required, found {mfusepy.fuse_version_major}."
            f"{mfusepy.fuse_version_minor} (install the Debian package fuse3)")


def current_fuse() -> int | None:
    """The ``struct fuse *`` of the request being handled (call it from a handler, e.g.
    ``init``); None outside one."""
    context = mfusepy._libfuse.fuse_get_context()
    if not context:
        return None
    return int(context.contents.fuse or 0) or None


def exit_loop(fuse: int) -> None:
    """Ask libfuse's request loop of ``fuse`` to stop (as its own signal handler does)."""
    mfusepy._libfuse.fuse_exit(ctypes.c_void_p(fuse))
