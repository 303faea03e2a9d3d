"""Metadata storms: create, stat, list and delete many small objects, as fast as possible.

Each user repeats storms: PUT ``--meta-files`` small objects (``--meta-size``) under a fresh
prefix, HEAD each one, LIST the prefix (and check every key is there: list-after-write),
DELETE each one, LIST again (and check it is empty: list-after-delete). Every request is
reported under its operation name; each storm phase is also reported as a ``PHASE``
request (``create N``, ``stat N``, ``list N``, ``delete N``) whose time is the whole phase.
With ``--meta-storms K`` every user stops after K storms and the test ends by itself.

The "1,000-file creation test" (one client creating 1,000 small files)::

    locust -f loadtests/metadata.py --headless --host http://127.0.0.1:9000 \\
        -u 1 -r 1 -t 5m --meta-files 1000 --meta-storms 1
"""

from __future__ import annotations

from typing import Any, ClassVar

from locust import constant, events, task
from locust.exception import StopUser

from backends.core.units import parse_size
from loadtests.coordination import AutoStop
from loadtests.s3user import S3User, add_s3_arguments, option, payload, timed


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    add_s3_arguments(parser)
    group = parser.add_argument_group("metadata scenario")
    group.add_argument("--meta-files", type=int, default=100, help="objects per storm per user")
    group.add_argument("--meta-size", default="1KiB", help="size of each object (0 allowed)")
    group.add_argument(
        "--meta-storms", type=int, default=0, help="storms per user, then stop (0: until -t)"
    )


class MetadataUser(S3User):
    wait_time = constant(0)
    autostop: ClassVar[AutoStop]

    def on_start(self) -> None:
        super().on_start()
        self.storms = 0

    @task
    def storm(self) -> None:
        env = self.environment
        files = option(env, "meta_files", 100)
        size = parse_size(option(env, "meta_size", "1KiB"))
        body = payload(size)
        prefix = self.key(f"storm-{self.storms:05d}") + "/"
        keys = [f"{prefix}f{i:06d}" for i in range(files)]
        self.storms += 1

        with timed(env, "PHASE", f"create {files}") as measure:
            for key in keys:
                self.s3.put_object(self.bucket, key, body)
                measure.length += size
        with timed(env, "PHASE", f"stat {files}"):
            for key in keys:
                self.s3.head_object(self.bucket, key)
        with timed(env, "PHASE", f"list {files}") as measure:
            listed = {e.key: e.size for e in self.s3.list_all(self.bucket, prefix)}
            missing = [k for k in keys if listed.get(k) != size]
            if missing or len(listed) != len(keys):
                measure.fail(
                    f"list-after-write: {len(missing)} of {len(keys)} keys missing or wrong size, "
                    f"{len(listed)} listed"
                )
        with timed(env, "PHASE", f"delete {files}"):
            for key in keys:
                self.s3.delete_object(self.bucket, key)
        with timed(env, "CHECK", "list-after-delete") as measure:
            left = self.s3.list_all(self.bucket, prefix)
            if left:
                measure.fail(f"list-after-delete: {len(left)} deleted keys still listed")

        storms = option(env, "meta_storms", 0)
        if storms and self.storms >= storms:
            self.autostop.finished()
            raise StopUser()


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    if environment.runner is not None:
        MetadataUser.autostop = AutoStop(environment, "metadata-autostop")
