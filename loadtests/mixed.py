"""A mixed S3 workload: GET/PUT/HEAD/LIST/DELETE over a realistic mix of object sizes.

Each user owns a pool of objects under its own prefix (seeded with ``--mixed-objects`` at
start, capped at ``--mixed-max-objects`` by deleting the oldest) and draws every operation
from ``--mixed-ops`` and every new object's size from ``--mixed-sizes`` (many small objects,
some MiB-sized ones). GETs and HEADs check the size the server returns against the size
written (``CHECK object size`` fails otherwise).

    locust -f loadtests/mixed.py --headless --host http://127.0.0.1:9000 -u 16 -r 16 -t 1m \\
        --mixed-sizes 4KiB:50,64KiB:25,1MiB:15,8MiB:8,32MiB:2
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Any

from locust import constant, events, task

from loadtests.s3user import S3User, add_s3_arguments, option, payload, report
from loadtests.units import SizeMix, parse_mix

OPERATIONS = ("get", "put", "head", "list", "delete")


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    add_s3_arguments(parser)
    group = parser.add_argument_group("mixed scenario")
    group.add_argument(
        "--mixed-sizes",
        default="4KiB:50,64KiB:25,1MiB:15,8MiB:8,32MiB:2",
        help="object sizes with weights",
    )
    group.add_argument(
        "--mixed-ops",
        default="get:45,put:15,head:20,list:10,delete:10",
        help="operations with weights (get, put, head, list, delete)",
    )
    group.add_argument("--mixed-objects", type=int, default=8, help="objects per user at start")
    group.add_argument("--mixed-max-objects", type=int, default=64, help="objects per user at most")


def parse_ops(text: str) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Parse "get:45,put:15" into operation names and weights."""
    names: list[str] = []
    weights: list[float] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, _, weight = item.partition(":")
        if name not in OPERATIONS:
            raise ValueError(f"unknown operation {name!r} in {text!r} (known: {OPERATIONS})")
        names.append(name)
        weights.append(float(weight) if weight else 1.0)
    if not names or sum(weights) <= 0:
        raise ValueError(f"no operation with a positive weight in {text!r}")
    return tuple(names), tuple(weights)


class MixedUser(S3User):
    wait_time = constant(0)

    def on_start(self) -> None:
        super().on_start()
        env = self.environment
        self.sizes: SizeMix = parse_mix(option(env, "mixed_sizes", "4KiB:50,1MiB:10"))
        self.ops, self.op_weights = parse_ops(option(env, "mixed_ops", "get:1,put:1"))
        self.max_objects = max(1, option(env, "mixed_max_objects", 64))
        self.objects: OrderedDict[str, int] = OrderedDict()  # key -> size, oldest first
        self.counter = 0
        for _ in range(max(1, option(env, "mixed_objects", 8))):
            self.do_put()

    @task
    def one_operation(self) -> None:
        op = random.choices(self.ops, weights=self.op_weights)[0]
        if not self.objects and op != "list":
            op = "put"
        getattr(self, f"do_{op}")()

    def do_put(self) -> None:
        size = self.sizes.pick()
        key = self.key(f"obj-{self.counter:08d}")
        self.counter += 1
        self.s3.put_object(self.bucket, key, payload(size))
        self.objects[key] = size
        while len(self.objects) > self.max_objects:
            oldest, _ = self.objects.popitem(last=False)
            self.s3.delete_object(self.bucket, oldest)

    def do_get(self) -> None:
        key = random.choice(list(self.objects))
        self._check_size(key, self.s3.get_object(self.bucket, key).nbytes)

    def do_head(self) -> None:
        key = random.choice(list(self.objects))
        resp = self.s3.head_object(self.bucket, key)
        self._check_size(key, int(resp.headers.get("content-length", -1)))

    def do_list(self) -> None:
        self.s3.list_page(self.bucket, self.prefix + "/", max_keys=100)

    def do_delete(self) -> None:
        if len(self.objects) <= 1:
            return self.do_put()
        key = random.choice(list(self.objects))
        del self.objects[key]
        self.s3.delete_object(self.bucket, key)

    def _check_size(self, key: str, got: int) -> None:
        expected = self.objects.get(key)
        if got != expected:
            report(
                self.environment,
                "CHECK",
                "object size",
                0.0,
                0,
                AssertionError(f"{key}: {got} bytes, {expected} written"),
            )
