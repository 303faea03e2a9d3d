"""Bulk-synchronous checkpointing: every user writes its checkpoint at the same moment.

Each user is one rank of a parallel application. K times (``--ckpt-phases``) it waits at a
barrier with every other user (across Locust workers too), writes its checkpoint object
(``--ckpt-size``), then computes (sleeps ``--ckpt-compute``). The *burst completion time* of
a phase is the time from the barrier release to the end of the last rank's write: what a
burst buffer is meant to shrink. Each phase is reported to Locust as a ``BURST`` request named
``checkpoint phase N`` (its time is the completion time, its size the bytes written) and the
phases are printed as a table at the end. The test stops by itself after the last phase.

    locust -f loadtests/checkpoint.py --headless --host http://127.0.0.1:9000 \\
        -u 8 -r 8 -t 2m --ckpt-size 64MiB --ckpt-compute 10s --ckpt-phases 5
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, ClassVar

import gevent
from locust import constant, events, task
from locust.exception import StopUser
from locust.runners import WorkerRunner

from backends.core.units import format_size, parse_duration, parse_size
from loadtests.coordination import AutoStop, ClusterBarrier
from loadtests.s3client import S3Error
from loadtests.s3user import CheckFailed, S3User, add_s3_arguments, option, payload, report

_BURST_MSG = "checkpoint:burst"


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    add_s3_arguments(parser)
    group = parser.add_argument_group("checkpoint scenario")
    group.add_argument("--ckpt-size", default="8MiB", help="checkpoint object size per user")
    group.add_argument("--ckpt-phases", type=int, default=3, help="checkpoints per user (K)")
    group.add_argument("--ckpt-compute", default="2s", help="compute time between checkpoints")
    group.add_argument(
        "--ckpt-keep", action="store_true", default=False, help="keep the checkpoint objects"
    )


@dataclass(slots=True)
class Burst:
    """One phase as seen by one process (or, merged, by the whole test)."""

    users: int = 0
    nbytes: int = 0
    seconds: float = 0.0
    failures: int = 0

    def merge(self, other: Burst) -> None:
        self.users += other.users
        self.nbytes += other.nbytes
        self.seconds = max(self.seconds, other.seconds)
        self.failures += other.failures


def format_bursts(bursts: dict[int, Burst]) -> str:
    """The end-of-test table: one line per phase."""
    lines = [
        f"{'phase':>5} {'users':>6} {'bytes':>10} {'failed':>6} {'completion s':>12} {'MiB/s':>9}"
    ]
    for phase in sorted(bursts):
        b = bursts[phase]
        rate = b.nbytes / (1 << 20) / b.seconds if b.seconds > 0 else 0.0
        lines.append(
            f"{phase:>5} {b.users:>6} {format_size(b.nbytes):>10} {b.failures:>6} "
            f"{b.seconds:>12.3f} {rate:>9.1f}"
        )
    return "\n".join(lines)


class BurstTracker:
    """Collects per-rank write completions into per-phase bursts and reports them."""

    def __init__(self, environment: Any, barrier: ClusterBarrier) -> None:
        self.environment = environment
        self.barrier = barrier
        self._pending: dict[int, list[tuple[float, int, bool]]] = defaultdict(list)
        self.merged: dict[int, Burst] = defaultdict(Burst)  # on the coordinator
        runner = environment.runner
        if not isinstance(runner, WorkerRunner):  # the coordinator: local or master
            runner.register_message(_BURST_MSG, self._on_burst)
            environment.events.quitting.add_listener(self._print)

    def record(self, phase: int, end: float, nbytes: int, ok: bool) -> None:
        entries = self._pending[phase]
        entries.append((end, nbytes, ok))
        if len(entries) != self.environment.runner.user_count:
            return  # the phase is complete once every local user has recorded it
        released = self.barrier.released_at.get(phase, min(e for e, _, _ in entries))
        burst = Burst(
            users=len(entries),
            nbytes=sum(n for _, n, ok in entries if ok),
            seconds=max(e for e, _, _ in entries) - released,
            failures=sum(1 for _, _, ok in entries if not ok),
        )
        failure = CheckFailed(f"{burst.failures} ranks failed") if burst.failures else None
        report(
            self.environment,
            "BURST",
            f"checkpoint phase {phase}",
            burst.seconds * 1000,
            burst.nbytes,
            failure,
        )
        self.environment.runner.send_message(
            _BURST_MSG,
            {
                "phase": phase,
                "users": burst.users,
                "nbytes": burst.nbytes,
                "seconds": burst.seconds,
                "failures": burst.failures,
            },
        )

    def _on_burst(self, environment: Any, msg: Any, **_: Any) -> None:
        data = dict(msg.data)
        self.merged[data.pop("phase")].merge(Burst(**data))

    def _print(self, **_: Any) -> None:
        if self.merged:
            print("\nCheckpoint bursts (completion = barrier release -> last rank's write done)")
            print(format_bursts(self.merged), flush=True)


class CheckpointUser(S3User):
    wait_time = constant(0)
    barrier: ClassVar[ClusterBarrier]
    tracker: ClassVar[BurstTracker]
    autostop: ClassVar[AutoStop]

    @task
    def checkpoint_run(self) -> None:
        env = self.environment
        size = parse_size(option(env, "ckpt_size", "8MiB"))
        phases = option(env, "ckpt_phases", 3)
        compute = parse_duration(option(env, "ckpt_compute", "2s"))
        body = payload(size)
        written: list[str] = []
        for phase in range(1, phases + 1):
            self.barrier.wait(phase)
            key = self.key("ckpt", f"phase-{phase:04d}")
            ok = True
            try:
                self.s3.put_object(self.bucket, key, body, name="PutObject checkpoint")
                written.append(key)
            except S3Error:
                ok = False
            self.tracker.record(phase, time.perf_counter(), size, ok)
            if phase < phases:
                gevent.sleep(compute)
        if not option(env, "ckpt_keep", False):
            for key in written:
                with contextlib.suppress(S3Error):  # already counted as a failure
                    self.s3.delete_object(self.bucket, key)
        self.autostop.finished()
        raise StopUser()


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    if environment.runner is None:
        return
    CheckpointUser.barrier = ClusterBarrier(environment, "checkpoint")
    CheckpointUser.tracker = BurstTracker(environment, CheckpointUser.barrier)
    CheckpointUser.autostop = AutoStop(environment, "checkpoint-autostop")
