"""Read-after-write and list-after-write checks; every stale answer is a failure.

Each round a user writes a fresh body (unique content) to one of its keys through one
endpoint, then immediately:

* reads it back through *another* endpoint (``CHECK read-after-write``): the body must be
  the one just written, byte for byte, with the ETag the PUT returned;
* lists the key's prefix through a third endpoint (``CHECK list-after-write``): the key
  must be listed with the new size;
* now and then (``--cons-delete-ratio``) deletes the key and checks that a HEAD returns 404
  (``CHECK read-after-delete``) and that the listing no longer has it
  (``CHECK list-after-delete``).

Keys are reused (``--cons-keys`` per user), so overwrites are checked too. Endpoints come
from ``--hosts URL1,URL2,URL3`` (replicas of one cluster) and default to ``--host``; with
one endpoint, writer and readers are distinct connections to it.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from typing import Any

from locust import constant, events, task

from backends.core.units import parse_size
from loadtests.s3user import S3User, add_s3_arguments, option, timed


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    add_s3_arguments(parser)
    group = parser.add_argument_group("consistency scenario")
    group.add_argument(
        "--hosts", default="", help="comma-separated endpoints to write at one, read at another"
    )
    group.add_argument("--cons-keys", type=int, default=4, help="keys per user (overwritten)")
    group.add_argument("--cons-size", default="4KiB", help="size of each written body")
    group.add_argument(
        "--cons-delete-ratio", type=float, default=0.2, help="fraction of rounds ending in DELETE"
    )


def parse_hosts(text: str, default: str | None) -> list[str]:
    """Endpoints from ``--hosts`` (comma-separated), else ``[default]``."""
    hosts = [h.strip().rstrip("/") for h in text.split(",") if h.strip()]
    if not hosts and default:
        hosts = [default.rstrip("/")]
    if not hosts:
        raise ValueError("no endpoint: pass --host URL or --hosts URL1,URL2")
    return hosts


def unique_body(tag: str, size: int) -> bytes:
    """A body of ``size`` bytes that no other write produces (starts with ``tag`` + a uuid)."""
    head = f"{tag}:{uuid.uuid4().hex}:".encode()
    return (head * (size // len(head) + 1))[:size] if size >= len(head) else head


class ConsistencyUser(S3User):
    wait_time = constant(0)

    def on_start(self) -> None:
        hosts = parse_hosts(option(self.environment, "hosts", ""), self.host)
        # distinct connections per role, even when every role goes to one endpoint
        self.writers = [self.new_client(h) for h in hosts]
        self.readers = [self.new_client(h) for h in hosts]
        self.listers = [self.new_client(h) for h in hosts]
        self.ensure_bucket(self.writers[0])
        self.rounds = 0
        self.size = parse_size(option(self.environment, "cons_size", "4KiB"))

    @task
    def round(self) -> None:
        env = self.environment
        n = len(self.writers)
        i = self.rounds
        self.rounds += 1
        writer = self.writers[i % n]
        reader = self.readers[(i + 1) % n]
        lister = self.listers[(i + min(2, n - 1)) % n]  # never the writer when n > 1
        key = self.key(f"k{i % option(env, 'cons_keys', 4):04d}")
        body = unique_body(f"{self.user_id}:{i}", self.size)
        etag = writer.put_object(self.bucket, key, body).headers.get("etag", "")

        with timed(env, "CHECK", "read-after-write") as check:
            got = reader.get_object(self.bucket, key, keep_body=True, expected=(200, 404))
            if got.status != 200:
                check.fail(f"read-after-write: {key} not found at {reader.endpoint}")
            elif got.body != body:
                check.fail(f"read-after-write: stale body for {key} at {reader.endpoint}")
            elif etag and got.headers.get("etag") not in (etag, None):
                check.fail(f"read-after-write: ETag {got.headers.get('etag')} != {etag}")
            elif etag.strip('"') != hashlib.md5(body).hexdigest():
                check.fail(f"PutObject ETag {etag} is not the MD5 of the body")
            check.length = len(got.body)

        with timed(env, "CHECK", "list-after-write") as check:
            listed = {e.key: e.size for e in lister.list_all(self.bucket, key)}
            if listed.get(key) != len(body):
                check.fail(
                    f"list-after-write: {key} listed as {listed.get(key)} at {lister.endpoint}"
                )

        if random.random() >= option(env, "cons_delete_ratio", 0.2):
            return
        writer.delete_object(self.bucket, key)
        with timed(env, "CHECK", "read-after-delete") as check:
            head = reader.head_object(self.bucket, key, expected=(404, 200))
            if head.status != 404:
                check.fail(f"read-after-delete: {key} still readable at {reader.endpoint}")
        with timed(env, "CHECK", "list-after-delete") as check:
            if key in {e.key for e in lister.list_all(self.bucket, key)}:
                check.fail(f"list-after-delete: {key} still listed at {lister.endpoint}")
