"""SIGKILL the real gateway at random points of a mixed workload, restart it on the same
data directory, and check every acknowledged write, overwrite, copy and delete.

Each worker thread owns its keys, so the operations on a key are sequential and its
history is exact: after the restart a key must hold the state of its last acknowledged
operation, or that of the one operation that was in flight at the kill (which may or may
not have taken effect). ``squall sync`` must then bring that state to the posix backend.
The kill points come from ``random.Random(SQUALL_FUZZ_SEED or the clock)``; the seed is in
every failure message.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests.conftest import make_client
from tests.support.server import SquallProcess, run_sync

BUCKET = "crash"
THREADS = 3
KEYS_PER_THREAD = 5
ROUNDS = 3
MIB = 1024 * 1024
PART = 256 * 1024  # multipart parts: the gateway is started with this minimum part size
GONE = "<absent>"  # the state of a key that does not exist


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class KeyState:
    """What a key may hold: its last acknowledged state, then the state of an operation
    that had not been answered when the server was killed (None: there was none)."""

    acked: str = GONE
    in_flight: str | None = None

    def possible(self) -> set[str]:
        return {self.acked} if self.in_flight is None else {self.acked, self.in_flight}


@dataclass
class Worker:
    """One thread of the workload: a client, its own keys, and what it saw acknowledged."""

    index: int
    rng: random.Random
    keys: dict[str, KeyState]
    stop: threading.Event
    acked_ops: int = 0
    errors: list[str] = field(default_factory=list)

    def run(self, endpoint: str) -> None:
        s3 = make_client(endpoint)
        while not self.stop.is_set():
            key = self.rng.choice(sorted(self.keys))
            state = self.keys[key]
            op = self.rng.choices(["small", "large", "multipart", "copy", "delete"],
                                  [40, 12, 10, 18, 20])[0]
            sources = [k for k, s in self.keys.items() if s.acked != GONE and k != key]
            if op == "copy" and not sources:
                op = "small"
            try:
                if op == "small":
                    size = self.rng.randint(0, 64 * 1024)
                    self._put(s3, key, state, self.rng.randbytes(size))
                elif op == "large":
                    self._put(s3, key, state, self.rng.randbytes(self.rng.randint(1, 8) * MIB
                                                                 - self.rng.randint(0, 999)))
                elif op == "multipart":
                    self._multipart(s3, key, state)
                elif op == "copy":
                    source = self.rng.choice(sources)
                    state.in_flight = self.keys[source].acked
                    s3.copy_object(Bucket=BUCKET, Key=key,
                                   CopySource={"Bucket": BUCKET, "Key": source})
                else:
                    state.in_flight = GONE
                    s3.delete_object(Bucket=BUCKET, Key=key)
            except Exception as exc:  # noqa: BLE001 - the kill cuts requests short
                if not self.stop.is_set():
                    self.errors.append(f"{op} {key}: {exc!r}")
                return
            if state.in_flight is not None:  # acknowledged
                state.acked, state.in_flight = state.in_flight, None
                self.acked_ops += 1

    def _put(self, s3, key: str, state: KeyState,  # type: ignore[no-untyped-def]
             body: bytes) -> None:
        state.in_flight = _digest(body)
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)

    def _multipart(self, s3, key: str, state: KeyState) -> None:  # type: ignore[no-untyped-def]
        parts = [self.rng.randbytes(PART + self.rng.randint(0, PART)) for _ in range(2)]
        parts.append(self.rng.randbytes(self.rng.randint(1, PART)))
        upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        done = [{"PartNumber": n, "ETag": s3.upload_part(Bucket=BUCKET, Key=key,
                                                         UploadId=upload, PartNumber=n,
                                                         Body=data)["ETag"]}
                for n, data in enumerate(parts, 1)]
        state.in_flight = _digest(b"".join(parts))  # only completion changes the key
        s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload,
                                     MultipartUpload={"Parts": done})


def _kill_during_workload(server: SquallProcess, workers: list[Worker],
                          rng: random.Random) -> None:
    """Run the workers, SIGKILL the server at a random moment once some writes were
    acknowledged, and wait for the workers to notice."""
    for w in workers:
        w.stop.clear()
    threads = [threading.Thread(target=w.run, args=(server.endpoint,), daemon=True)
               for w in workers]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    wanted = rng.randint(3, 12)
    while sum(w.acked_ops for w in workers) < wanted and time.monotonic() < deadline:
        if any(not t.is_alive() for t in threads):
            break
        time.sleep(0.01)
    time.sleep(rng.uniform(0, 0.8))
    for w in workers:
        w.stop.set()
    server.kill()
    for t in threads:
        t.join(30)
        assert not t.is_alive(), "a worker hung after the kill"


def _observe(server: SquallProcess, key: str) -> str:
    s3 = make_client(server.endpoint)
    try:
        return _digest(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "NoSuchKey":
            return GONE
        raise


def _check_after_restart(server: SquallProcess, workers: list[Worker], seed: int,
                         round_no: int) -> dict[str, str]:
    """Every key holds a state it may hold; the states seen become the new history."""
    seen: dict[str, str] = {}
    wrong = []
    for w in workers:
        assert not w.errors, f"seed={seed} round={round_no}: errors before the kill: {w.errors}"
        for key, state in w.keys.items():
            seen[key] = _observe(server, key)
            if seen[key] not in state.possible():
                wrong.append(f"{key}: {seen[key][:12]} not in "
                             f"{sorted(s[:12] for s in state.possible())}")
            w.keys[key] = KeyState(acked=seen[key])
    assert not wrong, f"seed={seed} round={round_no}: {wrong}\n{server.log()}"
    return seen


def _check_backend(data: Path, seen: dict[str, str], seed: int, round_no: int) -> None:
    root = data / "objects" / BUCKET
    wrong = []
    for key, digest in seen.items():
        path = root / key
        on_disk = _digest(path.read_bytes()) if path.is_file() else GONE
        if on_disk != digest:
            wrong.append(f"{key}: backend {on_disk[:12]}, served {digest[:12]}")
    assert not wrong, f"seed={seed} round={round_no}: after sync: {wrong}"


@pytest.mark.parametrize("cache_args", [[], ["--cache-size", "0"]], ids=["cache", "no-cache"])
def test_acknowledged_operations_survive_sigkill_at_random_points(
        tmp_path: Path, cache_args: list[str]) -> None:
    seed = int(os.environ.get("SQUALL_FUZZ_SEED") or time.time_ns() % 2**32)
    rng = random.Random(seed)
    data = tmp_path / "data"
    args = ["--min-part-size", str(PART), *cache_args]
    server = SquallProcess(data, args).start()
    make_client(server.endpoint).create_bucket(Bucket=BUCKET)
    workers = [Worker(i, random.Random(rng.getrandbits(64)),
                      {f"t{i}/k{n}": KeyState() for n in range(KEYS_PER_THREAD)},
                      threading.Event()) for i in range(THREADS)]
    try:
        for round_no in range(ROUNDS):
            _kill_during_workload(server, workers, rng)
            server = SquallProcess(data, args).start()
            seen = _check_after_restart(server, workers, seed, round_no)
            result = run_sync(server)
            assert result.returncode == 0, f"seed={seed} round={round_no}: {result.stderr}"
            _check_backend(data, seen, seed, round_no)
        assert server.stop() == 0, server.log()
    finally:
        server.kill()
