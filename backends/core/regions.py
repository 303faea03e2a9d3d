"""File regions: the rest of an object body as byte ranges of open files, which a server
may send with sendfile(2) instead of reading them through Python (no copy into user
space, no thread hop per piece)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``count`` bytes of the open file ``fd`` from ``offset``.

    ``run`` runs a blocking call in the thread pool of the file's device (a send may
    wait for the device to read pages that are not cached). The fd belongs to the body
    the region was taken from: it stays open until that body is closed.
    """

    fd: int
    offset: int
    count: int
    run: Callable[..., Awaitable[Any]]

    def fileno(self) -> int:
        return self.fd


async def take_regions(body: object) -> list[FileRegion] | None:
    """The regions holding the rest of ``body``, which then counts as read to its end
    (the caller sends them, then closes ``body``); None when ``body`` cannot give its
    bytes as file regions (it is then untouched and read as usual)."""
    take = getattr(body, "take_regions", None)
    if take is None:
        return None
    regions: list[FileRegion] | None = await take()
    return regions

