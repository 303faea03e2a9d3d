"""Failover benchmark: how long a dead member's keys stay unavailable, and what is refused.

``python -m loadtests.bench.failover`` starts an etcd and, for each lease TTL given, three
``squall serve`` members coordinated by it (``--dirty-replicas 2``, a throttled shared
posix backend so that what is written stays unflushed and must be taken over from the
copies), writes objects, and keeps reading and writing the keys one member owns through
the two others, a few clients at a time. It then SIGKILLs that member and measures:

* **unavailable**: from the kill until every probe of its keys is answered 200 again
  (the lease expires, the others hand over and adopt the copies);
* **refused**: the requests answered 503 (with Retry-After) meanwhile, and the other
  answers (there should be none);
* the acknowledged objects read back once it is over (all of them: no write lost).

Everything shares this machine's cores with the members and etcd; see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.client.credentials import credentials_from_env
from gateway.client.sigv4 import Signer
from gateway.cluster.ring import owner_index
from loadtests.bench.cluster import start_members
from loadtests.bench.server import coordinator_url, etcd_server, squall_credentials
from loadtests.bench.targets import S3Target, TargetError

BUCKET = "failover-bench"
DIRTY = ["--backend-bandwidth", "200KB/s", "--inactivity-delay", "3600"]


@dataclass(frozen=True, slots=True)
class Outcome:
    ttl_s: int
    unavailable_s: float
    refused: int
    other_errors: Counter[str]
    served_before: int
    lost: int


async def _probe(targets: Sequence[S3Target], keys: Sequence[str], stop: asyncio.Event,
                 log: list[tuple[float, str, str]], clients: int) -> None:
    """Each client alternates GETs and PUTs of ``keys`` through the targets in turn;
    every answer is logged (time, operation, outcome)."""
    async def client(index: int) -> None:
        turn = index
        while not stop.is_set():
            key = keys[turn % len(keys)]
            target = targets[turn % len(targets)]
            turn += 1
            operation = "put" if turn % 2 else "get"
            try:
                if operation == "put":
                    await target.put(key, key.encode() * 64)
                else:
                    await target.get(key)
                log.append((time.monotonic(), operation, "200"))
            except TargetError as exc:
                text = str(exc)
                outcome = "503" if "HTTP 503" in text else text.split(": ", 1)[-1][:60]
                log.append((time.monotonic(), operation, outcome))
                await asyncio.sleep(0.05)
    await asyncio.gather(*(client(i) for i in range(clients)))


async def _measure(ttl: int, work: Path, coordinator: str, env: dict[str, str],
                   signer: Signer, objects: int, clients: int) -> Outcome:
    servers = start_members(3, work, env, [*DIRTY, "--lease-ttl", str(ttl)], coordinator)
    urls = [s.endpoint for s in servers]
    targets = [S3Target(u, BUCKET, signer, clients=clients) for u in urls]
    try:
        await targets[0].create_bucket()
        written = {f"obj-{i}": f"obj-{i}".encode() * 64 for i in range(objects)}
        for index, (key, body) in enumerate(written.items()):
            await targets[index % 3].put(key, body)
        victim = 2
        theirs = [k for k in written if owner_index(urls, BUCKET, k) == victim]
        log: list[tuple[float, str, str]] = []
        stop = asyncio.Event()
        probing = asyncio.ensure_future(_probe(targets[:2], theirs, stop, log, clients))
        await asyncio.sleep(2.0)
        pid = servers[victim].pid
        assert pid is not None
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(ttl + 8.0)
        stop.set()
        await probing
        after = [entry for entry in log if entry[0] >= killed]
        failing = [t for t, _, outcome in after if outcome != "200"]
        back = max(failing, default=killed) - killed
        others = Counter(o for _, _, o in after if o not in ("200", "503"))
        lost = 0
        for key, body in written.items():
            if key in theirs:
                body = key.encode() * 64  # the probes rewrote them
            try:
                if await targets[0].get(key) != len(body):
                    lost += 1
            except TargetError:
                lost += 1
        return Outcome(ttl, back, sum(1 for _, _, o in after if o == "503"), others,
                       sum(1 for t, _, o in log if t < killed and o == "200"), lost)
    finally:
        for target in targets:
            await target.close()
        for server in servers:
            server.stop()


def table(outcomes: Sequence[Outcome]) -> str:
    head = ("| lease TTL (s) | keys unavailable after the kill (s) | requests refused (503) "
            "| other errors | objects lost |")
    lines = [head, "|---:|---:|---:|---|---:|"]
    for o in outcomes:
        others = ", ".join(f"{k}: {v}" for k, v in o.other_errors.items()) or "none"
        lines.append(f"| {o.ttl_s} | {o.unavailable_s:.2f} | {o.refused} | {others} "
                     f"| {o.lost} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests.bench.failover",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--ttls", default="2,5,10", help="lease TTLs to measure (seconds)")
    parser.add_argument("--objects", type=int, default=60, help="objects written first")
    parser.add_argument("--clients", type=int, default=4, help="probing clients")
    args = parser.parse_args(argv)
    ttls = [int(t) for t in args.ttls.split(",")]
    env = {**squall_credentials("FAILOVER"), "SQUALL_CLUSTER_SECRET": secrets.token_hex(16)}
    signer = Signer(credentials_from_env(env))
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="squall-failover-bench-") as tmp, \
            etcd_server(Path(tmp)) as etcd:
        for ttl in ttls:
            work = Path(tmp) / f"ttl{ttl}"
            work.mkdir()
            print(f"lease TTL {ttl} s", file=sys.stderr)
            outcomes.append(asyncio.run(_measure(ttl, work, coordinator_url(etcd), env,
                                                 signer, args.objects, args.clients)))
    print("A member SIGKILLed under load (3 members, --dirty-replicas 2): its keys through "
          "the two others\n")
    print(table(outcomes))
    return 0 if all(o.lost == 0 and not o.other_errors for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
