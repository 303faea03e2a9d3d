"""Bursts larger than the cache, and N-1 checkpoints, each beside ``--cache-size 0``.

``python -m loadtests.bench.overflow`` starts a fresh gateway for every run and writes:

* **burst**: multipart uploads of large objects (``--size`` in ``--part-size`` parts sent
  one after the other, ``--clients`` objects in flight, as warp and the MinIO client send
  them) until ``--burst`` bytes (default 4x the cache) are acknowledged;
* **burst, slow store**: the same with ``--backend-bandwidth`` at half the disk's
  measured rate (``--slow-store`` to choose), on every configuration;
* **N-1**: ``--n1-checkpoints`` checkpoints, each one shared multipart upload whose
  ``--n1-ranks`` ranks send their parts at once (as an MPI job writes one file through the
  mount), with ``--n1-compute`` seconds of compute between them, through the elastic
  cache in front of the slow store.

Every shape runs each configuration ``--repeat`` times, alternating, and prints the
median client throughput, its spread (min-max) and the ratio to the baseline
(``--cache-size 0`` on the same store) of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from yarl import URL

from backends.core.units import format_size, parse_size
from gateway.client.credentials import credentials_from_env
from gateway.client.sigv4 import Signer, object_path
from loadtests.bench.server import squall_credentials, squall_server
from loadtests.s3xml import error_code

MiB = 1 << 20


class UploadFailed(RuntimeError):
    """A multipart call was answered with an unexpected status."""


class Multipart:
    """Multipart uploads into one bucket: one aiohttp session, SigV4 with UNSIGNED-PAYLOAD
    (a cheap client: on a small machine its CPU is taken from the server)."""

    def __init__(self, endpoint: str, bucket: str, signer: Signer, *, clients: int) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._bucket = bucket
        self._signer = signer
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=max(1, clients)), auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=600),
            skip_auto_headers=("User-Agent", "Content-Type"))

    async def _call(self, method: str, key: str | None, query: str = "",
                    data: bytes = b"") -> tuple[bytes, dict[str, str]]:
        url = self._endpoint + object_path(self._bucket, key) + (f"?{query}" if query else "")
        headers = self._signer.sign(method, url, None, data)
        async with self._session.request(method, URL(url, encoded=True), data=data or None,
                                         headers=headers) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise UploadFailed(f"{method} {url}: HTTP {resp.status} "
                                   f"{error_code(body) or body[:200]!r}")
            return body, {k.lower(): v for k, v in resp.headers.items()}

    async def create_bucket(self) -> None:
        await self._call("PUT", None)

    async def create(self, key: str) -> str:
        body, _ = await self._call("POST", key, "uploads=")
        return body.split(b"<UploadId>", 1)[1].split(b"</UploadId>", 1)[0].decode()

    async def part(self, key: str, upload_id: str, number: int, data: bytes) -> str:
        _, headers = await self._call("PUT", key, f"partNumber={number}&uploadId={upload_id}",
                                      data)
        return headers["etag"]

    async def complete(self, key: str, upload_id: str, etags: dict[int, str]) -> None:
        parts = "".join(f"<Part><PartNumber>{n}</PartNumber><ETag>{etags[n]}</ETag></Part>"
                        for n in sorted(etags))
        doc = f"<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>".encode()
        await self._call("POST", key, f"uploadId={upload_id}", doc)

    async def close(self) -> None:
        await self._session.close()


async def burst(client: Multipart, *, total: int, size: int, part: int, clients: int,
                data: bytes) -> float:
    """Seconds until ``total`` bytes of ``size``-byte objects (parts sent in order,
    ``clients`` objects in flight) are acknowledged, completions included."""
    objects = iter(range(-(-total // size)))

    async def writer() -> None:
        for n in objects:
            key = f"burst/{n:05d}"
            upload_id = await client.create(key)
            etags = {}
            for i, offset in enumerate(range(0, size, part), start=1):
                etags[i] = await client.part(key, upload_id, i, data[offset:offset + part])
            await client.complete(key, upload_id, etags)
    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(clients)))
    return time.perf_counter() - started


async def n1(client: Multipart, *, checkpoints: int, ranks: int, parts: int, part: int,
             compute_s: float, data: bytes) -> float:
    """Seconds of the ``checkpoints`` checkpoints (barrier to completion, compute not
    counted): each one upload whose ``ranks`` ranks send ``parts`` parts each at once."""
    spent = 0.0
    for c in range(checkpoints):
        key = f"n1/ckpt-{c}"
        started = time.perf_counter()
        upload_id = await client.create(key)
        etags: dict[int, str] = {}

        async def rank(r: int, upload_id: str = upload_id, key: str = key,
                       etags: dict[int, str] = etags) -> None:
            for i in range(parts):
                number = r * parts + i + 1
                etags[number] = await client.part(key, upload_id, number, data[:part])
        await asyncio.gather(*(rank(r) for r in range(ranks)))
        await client.complete(key, upload_id, etags)
        spent += time.perf_counter() - started
        if c + 1 < checkpoints:
            await asyncio.sleep(compute_s)
    return spent


def disk_rate(directory: Path, size: int = 512 * MiB) -> float:
    """Bytes/s of one file of ``size`` bytes written and fsynced in ``directory``."""
    path = directory / f"disk-rate-{uuid.uuid4().hex}"
    block = os.urandom(8 * MiB)
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for _ in range(size // len(block)):
            os.write(fd, block)
        os.fsync(fd)
    finally:
        os.close(fd)
        path.unlink()
    return size / (time.perf_counter() - started)


@dataclass
class Row:
    """One shape: seconds and bytes of every run, per configuration."""

    shape: str
    baseline: str
    runs: dict[str, list[float]] = field(default_factory=dict)  # MiB/s per run

    def add(self, config: str, mib_per_s: float) -> None:
        self.runs.setdefault(config, []).append(mib_per_s)

    def lines(self) -> list[str]:
        base = statistics.median(self.runs[self.baseline]) if self.baseline in self.runs \
            else None
        out = []
        for config, values in self.runs.items():
            median = statistics.median(values)
            ratio = f"{median / base:.2f}x" if base else "-"
            out.append(f"| {self.shape} | {config} | {median:.0f} | {min(values):.0f}-"
                       f"{max(values):.0f} | {ratio} |")
        return out


def table(rows: Sequence[Row]) -> str:
    head = ["| shape | configuration | MiB/s (median) | spread | median / baseline |",
            "|---|---|---:|---:|---:|"]
    return "\n".join(head + [line for row in rows for line in row.lines()])


def run_once(name: str, args: Sequence[str], work: Path, shape: str,
             job: Callable[[Multipart], Awaitable[float]], clients: int) -> float:
    """Start a fresh gateway, run ``job`` (a coroutine factory giving seconds), stop it."""
    env = squall_credentials("OVERFLOW")
    data_dir = work / name
    try:
        with squall_server(name, args, work, env) as server:
            signer = Signer(credentials_from_env(env))

            async def go() -> float:
                client = Multipart(server.endpoint, "overflow", signer, clients=clients)
                try:
                    await client.create_bucket()
                    return await job(client)
                finally:
                    await client.close()
            seconds = asyncio.run(go())
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    print(f"  {shape}: {name}: {seconds:.2f} s", file=sys.stderr)
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.overflow",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="1GiB", help="cache size of the cached configs")
    parser.add_argument("--burst", default=None, help="bytes per burst (default 4x --cache)")
    parser.add_argument("--size", default="64MiB", help="object size of the bursts")
    parser.add_argument("--part-size", default="16MiB")
    parser.add_argument("--clients", type=int, default=4, help="objects in flight")
    parser.add_argument("--slow-store", default=None,
                        help="--backend-bandwidth of the slow store (default: half the "
                             "disk's measured rate)")
    parser.add_argument("--n1-checkpoints", type=int, default=4)
    parser.add_argument("--n1-ranks", type=int, default=4)
    parser.add_argument("--n1-parts", type=int, default=4, help="parts per rank")
    parser.add_argument("--n1-part-size", default="8MiB")
    parser.add_argument("--n1-compute", type=float, default=2.0, help="seconds")
    parser.add_argument("--shapes", default="burst,burst-slow,n1",
                        help="comma-separated: burst, burst-slow, n1")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None,
                        help="directory for the gateways' data (default: a temporary one "
                             "under $TMPDIR)")
    args = parser.parse_args(argv)
    cache = parse_size(args.cache)
    total = parse_size(args.burst) if args.burst else 4 * cache
    size, part = parse_size(args.size), parse_size(args.part_size)
    n1_part = parse_size(args.n1_part_size)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    data = os.urandom(max(size, n1_part))
    with tempfile.TemporaryDirectory(prefix="squall-overflow-", dir=args.work) as tmp:
        work = Path(tmp)
        rate = parse_size(args.slow_store.removesuffix("/s")) if args.slow_store \
            else int(disk_rate(work) / 2)
        slow = ["--backend-bandwidth", f"{rate}"]
        cached = ["--cache-size", str(cache)]
        nocache = ["--cache-size", "0"]
        n1_bytes = args.n1_ranks * args.n1_parts * n1_part
        plans: dict[str, tuple[dict[str, list[str]], Callable[[Multipart], Awaitable[float]],
                              int]] = {
            "burst": ({"default": cached, "cache-size-0": nocache},
                      lambda c: burst(c, total=total, size=size, part=part,
                                      clients=args.clients, data=data), total),
            "burst-slow": ({"default": cached + slow, "cache-size-0": nocache + slow},
                           lambda c: burst(c, total=total, size=size, part=part,
                                           clients=args.clients, data=data), total),
            "n1": ({"elastic": ["--cache-mode", "elastic", *cached, *slow],
                    "cache-size-0": nocache + slow},
                   lambda c: n1(c, checkpoints=args.n1_checkpoints, ranks=args.n1_ranks,
                                parts=args.n1_parts, part=n1_part,
                                compute_s=args.n1_compute, data=data),
                   args.n1_checkpoints * n1_bytes),
        }
        rows = []
        for shape in shapes:
            configs, job, nbytes = plans[shape]
            row = Row(shape, "cache-size-0")
            for _ in range(args.repeat):
                for name, extra in configs.items():
                    seconds = run_once(name, extra, work, shape, job,
                                       clients=max(args.clients, args.n1_ranks))
                    row.add(name, nbytes / MiB / seconds)
            rows.append(row)
    print(f"burst: {format_size(total)} of {format_size(size)} objects in "
          f"{format_size(part)} parts, {args.clients} in flight, cache {format_size(cache)}; "
          f"slow store: --backend-bandwidth {format_size(rate)}/s; n1: "
          f"{args.n1_checkpoints} checkpoints of {format_size(n1_bytes)} "
          f"({args.n1_ranks} ranks x {args.n1_parts} parts of {format_size(n1_part)}), "
          f"{args.n1_compute:g} s compute; {args.repeat} runs each, alternating\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
