"""The one bounded way to run blocking work (file I/O, fsync, RocksDB, hashing) off the loop."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_MAX_WORKERS = 32
_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    # Created lazily on first use (never at import time); threads are daemonic workers.
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=_MAX_WORKERS, thread_name_prefix="squall-io")
    return _executor


async def run_blocking(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn(*args, **kwargs)`` in the shared bounded worker pool and await its result."""
    loop = asyncio.get_running_loop()
    call = functools.partial(fn, *args, **kwargs) if kwargs else functools.partial(fn, *args)
    return await loop.run_in_executor(_pool(), call)
