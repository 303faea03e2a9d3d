"""The bounded way to run blocking work (file I/O, fsync, RocksDB, hashing) off the loop.

Work runs in named, bounded thread pools, one per device class, so that a slow device
never holds the threads another one needs: backends use ``run_blocking`` (the "backend"
pool); the cache tier uses its own pool (``run_cache_blocking``), so a backend
stalled on a slow NFS server cannot delay acknowledgements from the cache volume.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_MAX_WORKERS = 32
_executors: dict[str, ThreadPoolExecutor] = {}


def _pool(name: str) -> ThreadPoolExecutor:
    # Created lazily on first use (never at import time); threads are daemonic workers.
    executor = _executors.get(name)
    if executor is None:
        executor = _executors[name] = ThreadPoolExecutor(
            max_workers=_MAX_WORKERS, thread_name_prefix=f"squall-{name}")
    return executor


def _submit(pool: str, fn: Callable[..., T], args: tuple[object, ...],
            kwargs: dict[str, object]) -> asyncio.Future[T]:
    call = functools.partial(fn, *args, **kwargs) if kwargs else functools.partial(fn, *args)
    return asyncio.get_running_loop().run_in_executor(_pool(pool), call)


async def run_blocking(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn(*args, **kwargs)`` in the backend's bounded worker pool."""
    return await _submit("backend", fn, args, kwargs)


async def run_cache_blocking(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn(*args, **kwargs)`` in the cache device's bounded worker pool."""
    return await _submit("cache", fn, args, kwargs)
