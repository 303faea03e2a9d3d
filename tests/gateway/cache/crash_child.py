"""Child process of the crash tests: drives a CacheTier and reports every acknowledgement.

Run as ``python -m tests.gateway.cache.crash_child CONFIG_JSON``. Prints ``READY``, then
one line per acknowledged operation (``ACK <key> <seed> <size>``, ``PART <upload>
<n> <etag>``), and ``FLUSHING`` once a flush is under way; the parent kills it with
SIGKILL at a moment of its choosing. Mode ``concurrent`` runs ``writers`` PUTs at once
(unique keys, sizes cycling through ``sizes``), so their commits share WAL syncs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

from backends.core.base import CompletedPart
from backends.core.errors import BucketAlreadyOwnedByYou
from backends.throttled import ThrottledBackend, ThrottleSettings
from gateway.cache.settings import CacheSettings
from gateway.cache.tier import CacheTier
from tests.gateway.cache.conftest import BUCKET, META, body, payload, posix_backend


def say(*words: object) -> None:
    print(*words, flush=True)


async def main(cfg: dict[str, Any]) -> None:
    inner = posix_backend(Path(cfg["backend_root"]))
    if cfg.get("throttle") or cfg.get("iops"):
        inner = ThrottledBackend(inner, ThrottleSettings(
            bandwidth_bytes_per_s=cfg.get("throttle"), iops=cfg.get("iops")))
    tier = CacheTier(inner, CacheSettings(**cfg["settings"]),
                     index_path=Path(cfg["index_path"]), min_part_size=4096)
    await tier.start()
    with contextlib.suppress(BucketAlreadyOwnedByYou):
        await tier.create_bucket(BUCKET)
    say("READY")
    mode, count, size = cfg["mode"], cfg["count"], cfg["size"]
    if mode == "puts":
        for i in range(count):
            seed = cfg.get("seed0", 0) + i
            key = f"k{i % cfg.get('keys', count)}"
            await tier.put_object(BUCKET, key, body(payload(size, seed), 4096), meta=META)
            say("ACK", key, seed, size)
        if cfg.get("delete_after"):
            for i in range(count):
                await tier.delete_object(BUCKET, f"k{i}")
                say("DEL", f"k{i}")
    elif mode == "concurrent":
        numbers = itertools.count()
        sizes = cfg["sizes"]

        async def writer() -> None:
            while (i := next(numbers)) < count:
                n = sizes[i % len(sizes)]
                await tier.put_object(BUCKET, f"c{i}", body(payload(n, i), 4096), meta=META)
                say("ACK", f"c{i}", i, n)
        await asyncio.gather(*(writer() for _ in range(cfg.get("writers", 16))))
    elif mode == "multipart":
        up = await tier.create_multipart_upload(BUCKET, "mp", meta=META)
        say("UPLOAD", up.upload_id)
        parts = []
        for n in range(1, count + 1):
            info = await tier.upload_part(BUCKET, "mp", up.upload_id, n,
                                          body(payload(size, 1000 + n), 4096))
            parts.append(CompletedPart(n, info.etag))
            say("PART", n, info.etag)
        if cfg.get("complete"):
            done = await tier.complete_multipart_upload(BUCKET, "mp", up.upload_id, parts)
            say("COMPLETE", done.etag)
    if cfg.get("report_flushing"):
        while tier.status()["flush_bytes_total"] == 0:  # noqa: ASYNC110  a test polling
            await asyncio.sleep(0.005)
        say("FLUSHING")
    say("DONE")
    await asyncio.sleep(3600)  # wait to be killed


if __name__ == "__main__":
    asyncio.run(main(json.loads(Path(sys.argv[1]).read_text())))
