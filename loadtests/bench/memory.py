"""Memory per request: stream one large object through the gateway and watch its RSS.

``python -m loadtests.bench.memory --size 2GiB`` starts ``squall serve`` (once without and
once with the cache tier), PUTs an object of ``--size`` generated on the fly (never held
in memory by the client either), GETs it back, and prints the server's resident memory
before and its peak (VmHWM) after each step. Bodies are streamed, so the growth must stay
at a few chunks whatever the size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import aiohttp

from backends.core.units import format_size, parse_size
from gateway.client.credentials import credentials_from_env
from gateway.client.sigv4 import Signer
from loadtests.bench.server import squall_credentials, squall_server

PIECE = 1 << 20


def _rss_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not found for pid {pid}")


async def _generate(size: int) -> AsyncIterator[bytes]:
    piece = os.urandom(PIECE)
    sent = 0
    while sent < size:
        n = min(PIECE, size - sent)
        yield piece[:n]
        sent += n


async def _transfer(endpoint: str, signer: Signer, size: int) -> None:
    url = f"{endpoint}/memory/big"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
        async with session.put(f"{endpoint}/memory",
                               headers=signer.sign("PUT", f"{endpoint}/memory")) as r:
            await r.read()
        headers = {**signer.sign("PUT", url), "content-length": str(size)}
        async with session.put(url, data=_generate(size), headers=headers) as r:
            if r.status != 200:
                raise RuntimeError(f"PUT failed: {r.status} {await r.text()}")
        async with session.get(url, headers=signer.sign("GET", url)) as r:
            got = 0
            async for chunk in r.content.iter_chunked(PIECE):
                got += len(chunk)
            if got != size:
                raise RuntimeError(f"GET returned {got} bytes, expected {size}")


def measure(name: str, args: Sequence[str], size: int, work: Path) -> tuple[int, int]:
    """(RSS before, peak RSS after) of the server in KiB."""
    env = squall_credentials("MEM")
    with squall_server(name, args, work, env) as server:
        assert server.pid is not None
        before = _rss_kib(server.pid, "VmRSS")
        asyncio.run(_transfer(server.endpoint, Signer(credentials_from_env(env)), size))
        return before, _rss_kib(server.pid, "VmHWM")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.memory",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="2GiB")
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    configs = {"no cache": ["--cache-size", "0"],
               "cache": ["--cache-size", format_size(size * 2)]}
    print(f"one PUT then one GET of {format_size(size)}, streamed\n")
    print("| configuration | RSS before (MiB) | peak RSS after (MiB) | growth (MiB) |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="squall-memory-") as tmp:
        for name, extra in configs.items():
            before, peak = measure(name.replace(" ", "-"), extra, size, Path(tmp))
            print(f"| {name} | {before / 1024:.0f} | {peak / 1024:.0f} | "
                  f"{(peak - before) / 1024:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
