"""posix vs blobseer_like under concurrent clients (the Cumulus/BlobSeer benchmark, seed 5.2).

``python -m loadtests.bench.blobseer`` starts one gateway per backend, without a cache
tier so that every byte goes to the backend: ``posix`` with the whole directory capped
at ``--cap`` (``--backend-bandwidth``), and ``blobseer_like`` over ``--providers``
directories each capped at ``--cap`` (``?cap=``): separate virtual disks, each with its
own reserved bandwidth (seed adaptive-caching III-B). For each client count, every
client uploads one object at once, then every client downloads its object at once; the
table gives aggregate and mean per-client MiB/s of both phases. Bounded: each gateway is
stopped by PID, and the run stops (printing what it has) once ``--deadline`` is reached.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from backends.core.units import format_size, parse_size
from gateway.client.credentials import credentials_from_env
from gateway.client.sigv4 import Signer
from loadtests.bench.server import squall_credentials, squall_server
from loadtests.bench.targets import S3Target

MiB = 1 << 20


@dataclass(frozen=True)
class Row:
    backend: str
    clients: int
    up_total: float  # aggregate MiB/s
    up_client: float  # mean per-client MiB/s
    down_total: float
    down_client: float


async def _timed(coro: object) -> float:
    started = time.perf_counter()
    await coro  # type: ignore[misc]
    return time.perf_counter() - started


async def round_trip(endpoint: str, signer: Signer, bucket: str, *, clients: int,
                     data: bytes,
                     timeout: float,  # noqa: ASYNC109  one bound per phase (up, down)
                     ) -> tuple[float, float, float, float]:
    """(upload total, upload per client, download total, download per client) in MiB/s."""
    target = S3Target(endpoint, bucket, signer, clients=clients)
    size = len(data) / MiB
    try:
        await target.create_bucket()
        keys = [f"client-{i:03d}" for i in range(clients)]
        started = time.perf_counter()
        ups = await asyncio.wait_for(asyncio.gather(
            *(_timed(target.put(key, data)) for key in keys)), timeout)
        up_wall = time.perf_counter() - started

        async def download(key: str) -> float:
            t0 = time.perf_counter()
            if await target.get(key) != len(data):
                raise RuntimeError(f"short read of {key}")
            return time.perf_counter() - t0

        started = time.perf_counter()
        downs = await asyncio.wait_for(asyncio.gather(*(download(k) for k in keys)), timeout)
        down_wall = time.perf_counter() - started
        for key in keys:
            await target.delete(key)
        return (clients * size / up_wall, sum(size / t for t in ups) / clients,
                clients * size / down_wall, sum(size / t for t in downs) / clients)
    finally:
        await target.close()


def backend_args(name: str, work: Path, *, cap: str | None, providers: int,
                 chunk: str) -> list[str]:
    if name == "posix":
        args = ["--backend", f"posix:{work / 'posix'}"]
        return [*args, "--backend-bandwidth", cap] if cap else args
    dirs = ",".join(str(work / f"provider{i}") for i in range(providers))
    options = f"chunk={chunk}" + (f"&cap={cap}" if cap else "")
    return ["--backend", f"blobseer_like:{dirs}?{options}"]


def run(args: argparse.Namespace) -> list[Row]:
    size = parse_size(args.size)
    data = os.urandom(size)
    deadline = time.monotonic() + args.deadline
    rows: list[Row] = []
    cap = None if args.cap == "none" else args.cap
    for name in args.backends.split(","):
        for chunk in args.chunk.split(","):
            label = name if name == "posix" else f"blobseer_like x{args.providers} ({chunk})"
            env = squall_credentials("BS")
            signer = Signer(credentials_from_env(env))
            with tempfile.TemporaryDirectory(prefix="squall-blobseer-", dir=args.work) as tmp:
                work = Path(tmp)
                server = squall_server(
                    "gateway", ["--cache-size", "0", *backend_args(
                        name, work, cap=cap, providers=args.providers, chunk=chunk)],
                    work, env)
                with server:
                    for clients in args.clients:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            print("deadline reached: stopping", file=sys.stderr)
                            return rows
                        print(f"{label}: {clients} clients x {format_size(size)}",
                              file=sys.stderr)
                        result = asyncio.run(round_trip(
                            server.endpoint, signer, f"bench-{clients}", clients=clients,
                            data=data, timeout=left))
                        rows.append(Row(label, clients, *result))
                if name == "posix":
                    break  # the chunk size is a blobseer_like option
    return rows


def render(rows: list[Row]) -> str:
    lines = [("| backend | clients | upload MiB/s (total) | upload MiB/s per client | "
              "download MiB/s (total) | download MiB/s per client |"),
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.backend} | {r.clients} | {r.up_total:.1f} | {r.up_client:.1f} | "
                     f"{r.down_total:.1f} | {r.down_client:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.blobseer",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,2,4,8,16",
                        type=lambda s: [int(x) for x in s.split(",")],
                        help="client counts (default 1,2,4,8,16)")
    parser.add_argument("--size", default="32MiB", help="object size per client")
    parser.add_argument("--cap", default="25MiB/s",
                        help="bandwidth of each provider and of the posix directory "
                             "('none': uncapped)")
    parser.add_argument("--providers", type=int, default=4)
    parser.add_argument("--chunk", default="1MiB",
                        help="blobseer_like chunk size(s), comma-separated to compare")
    parser.add_argument("--backends", default="posix,blobseer_like")
    parser.add_argument("--deadline", type=float, default=1800.0,
                        help="seconds after which the run stops")
    parser.add_argument("--work", default=None, help="directory for the data (default: tmp)")
    args = parser.parse_args(argv)
    rows = run(args)
    print(f"{format_size(parse_size(args.size))} per client, upload then download; cap "
          f"{args.cap} per provider and on the posix directory; no cache tier; every PUT "
          "fsynced before it is acknowledged\n")
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
