"""A history of S3 operations on a cluster, and the checks of what a client may see.

The load (``python -m tests.gateway.cluster.history load ...``, also run inside a network
namespace) writes unique values to a few keys and reads them back through every member,
from several threads (each the client of one member), and records each operation: its key, the member it went through,
the value written or read, when it started and ended (one monotonic clock: the processes
run on one machine), and how it ended (status, error code, whether a Retry-After came).
``final`` reads every key through every member once the faults are over.

The checks (:func:`check`) are those of a linearizable register per key, with writes
whose outcome the client does not know (any answer but 200) allowed to have happened or
not:

* **no lost write**: the final value of a key is written by a write that no acknowledged
  write followed (started after it ended);
* **no stale read**: a read returns the value of a write that no acknowledged write
  followed before the read began (or no value, if no write was acknowledged before it);
* **errors are 503 with Retry-After** (``SlowDown``/``ServiceUnavailable``); a write
  through ``fenced`` (a member cut off from the others and from etcd during ``cut``) is
  acknowledged only before its lease can have expired (``ttl`` after the cut began).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from gateway.cluster.client import wait_members

ACCESS_KEY = "SQUALLTESTACCESS"
SECRET_KEY = "squall-test-secret-key"


@dataclass
class Op:
    kind: str  # "put" or "get"
    key: str
    via: int  # the member the request went through
    value: str | None  # written, or read (None: no such key)
    start: float
    end: float
    status: int  # HTTP status; 0: no answer (connection error or timeout)
    code: str = ""
    retry_after: bool = False


def _client(endpoint: str, timeout: float) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}, connect_timeout=2,
                                      read_timeout=timeout))


def _call(kind: str, s3: Any, bucket: str, key: str, via: int, value: str | None
          ) -> Op:
    start = time.monotonic()
    try:
        if kind == "put":
            s3.put_object(Bucket=bucket, Key=key, Body=(value or "").encode())
            got = value
        else:
            got = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
        return Op(kind, key, via, got, start, time.monotonic(), 200)
    except ClientError as exc:
        meta = exc.response.get("ResponseMetadata", {})
        status = int(meta.get("HTTPStatusCode", 0))
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if kind == "get" and status == 404:
            return Op(kind, key, via, None, start, time.monotonic(), 200, "NoSuchKey")
        return Op(kind, key, via, value if kind == "put" else None, start, time.monotonic(),
                  status, code, "retry-after" in meta.get("HTTPHeaders", {}))
    except Exception as exc:  # noqa: BLE001 - connection errors: no answer
        return Op(kind, key, via, value if kind == "put" else None, start, time.monotonic(),
                  0, type(exc).__name__)


def load(endpoints: Sequence[str], bucket: str, seconds: float, keys: int, threads: int,
         out: Path, *, timeout: float = 30.0, failover: bool = False) -> None:
    """Run the load for ``seconds``; every operation is appended to ``out`` (JSON lines).
    ``failover``: a request a member refused to connect (it is restarting: the request
    was never sent) goes to the next member, as behind a load balancer."""
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    counter = iter(range(10 ** 9))
    names = [f"reg-{i}" for i in range(keys)]
    with open(out, "w") as sink:
        def worker(index: int) -> None:
            home = index % len(endpoints)  # each thread is a client of one member
            clients = [_client(e, timeout) for e in endpoints]
            rng = random.Random(index)
            while time.monotonic() < stop:
                key = rng.choice(names)
                kind, value = "get", None
                if rng.random() < 0.5:
                    with lock:
                        kind, value = "put", f"w{next(counter)}-t{index}"
                for attempt in range(len(endpoints) if failover else 1):
                    via = (home + attempt) % len(endpoints)
                    op = _call(kind, clients[via], bucket, key, via, value)
                    if op.code != "EndpointConnectionError":
                        break
                with lock:
                    sink.write(json.dumps(asdict(op)) + "\n")
                if op.status not in (200, 404):
                    time.sleep(0.05)
        pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()


def final(endpoints: Sequence[str], bucket: str, keys: int, out: Path) -> None:
    """Every key read through every member (retrying 503s for a while)."""
    with open(out, "w") as sink:
        for via, endpoint in enumerate(endpoints):
            s3 = _client(endpoint, 30)
            for i in range(keys):
                deadline = time.monotonic() + 60
                while True:
                    op = _call("get", s3, bucket, f"reg-{i}", via, None)
                    if op.status == 200 or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                sink.write(json.dumps(asdict(op)) + "\n")


def ready(endpoints: Sequence[str], bucket: str) -> None:
    """Wait until the members agree on the ring and serve; then make sure ``bucket``
    exists."""
    wait_members(endpoints, timeout=60)
    s3 = _client(endpoints[0], 30)
    with contextlib.suppress(ClientError):
        s3.create_bucket(Bucket=bucket)


def read_ops(path: Path) -> list[Op]:
    return [Op(**json.loads(line)) for line in path.read_text().splitlines() if line]


@dataclass
class Verdict:
    ops: int
    acknowledged_writes: int
    errors: dict[str, int]
    problems: list[str]


def check(history: Sequence[Op], finals: Sequence[Op], *, fenced: int | None = None,
          cut: tuple[float, float] | None = None, ttl: float = 0.0) -> Verdict:
    """The checks of the module docstring; ``problems`` lists every violation."""
    problems: list[str] = []
    writes: dict[str, dict[str, Op]] = defaultdict(dict)  # key -> value -> write
    acked: dict[str, list[Op]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    for op in history:
        if op.kind == "put":
            assert op.value is not None
            writes[op.key][op.value] = op
            if op.status == 200:
                acked[op.key].append(op)
        if op.status != 200:
            errors[f"{op.status} {op.code}"] += 1
            if op.status not in (503, 0) or (op.status == 503 and not op.retry_after):
                problems.append(f"an error other than 503 with Retry-After: {op}")
        if fenced is not None and cut is not None and op.kind == "put" \
                and op.via == fenced and op.status == 200 and cut[0] + ttl < op.end < cut[1]:
            problems.append(f"a write acknowledged by the cut-off member after its lease "
                            f"could have expired ({op.end - cut[0]:.2f} s after the cut): {op}")

    def superseded(write: Op | None, key: str, before: float) -> Op | None:
        """An acknowledged write of ``key`` that followed ``write`` and ended before
        ``before`` (None: there is none)."""
        for other in acked[key]:
            if other.end < before and (write is None or other.start > write.end):
                return other
        return None

    for op in history:
        if op.kind != "get" or op.status != 200:
            continue
        write = writes[op.key].get(op.value) if op.value is not None else None
        if op.value is not None and write is None:
            problems.append(f"a read returned a value never written: {op}")
            continue
        newer = superseded(write, op.key, op.start)
        if newer is not None:
            problems.append(f"stale read: {op} returned {op.value!r} though {newer} was "
                            "acknowledged before it began")
    for op in finals:
        if op.status != 200:
            problems.append(f"final read failed: {op}")
            continue
        write = writes[op.key].get(op.value) if op.value is not None else None
        newer = superseded(write, op.key, float("inf"))
        if newer is not None:
            problems.append(f"lost write: {op.key} reads {op.value!r} through member "
                            f"{op.via}, but {newer} was acknowledged after it")
    return Verdict(len(history), sum(len(v) for v in acked.values()), dict(errors),
                   problems)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="history")
    parser.add_argument("what", choices=("ready", "load", "final"))
    parser.add_argument("--endpoints", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--keys", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--out", type=Path, default=Path("/dev/null"))
    parser.add_argument("--failover", action="store_true")
    args = parser.parse_args(argv)
    endpoints = args.endpoints.split(",")
    if args.what == "ready":
        ready(endpoints, args.bucket)
    elif args.what == "load":
        load(endpoints, args.bucket, args.seconds, args.keys, args.threads, args.out,
             failover=args.failover)
    else:
        final(endpoints, args.bucket, args.keys, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
