"""Coordination across all users of a test, in one process or across Locust workers.

Two roles, played by Locust's runners:

* a *participant* runs users: the LocalRunner, or each WorkerRunner;
* the *coordinator* decides for everyone: the LocalRunner again, or the MasterRunner.

Participants talk to the coordinator with Locust's custom messages (``runner.send_message``);
with a LocalRunner the messages are plain calls, so the same code runs in both modes.
Both helpers must be created from an ``events.init`` listener so that the messages are
registered on every node before the test starts.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any

import gevent
from gevent.event import Event
from locust.runners import MasterRunner, WorkerRunner
from locust.stats import CSV_STATS_INTERVAL_SEC

log = logging.getLogger(__name__)


class _Roles:
    """Which roles this process plays, and who participates (known once spawning completes)."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.runner = environment.runner
        self.is_coordinator = not isinstance(self.runner, WorkerRunner)
        self.is_participant = not isinstance(self.runner, MasterRunner)
        self.spawned = Event()
        self.participants: set[str] = set()
        environment.events.spawning_complete.add_listener(self._on_spawned)
        environment.events.test_start.add_listener(self._on_test_start)

    def _on_test_start(self, **_: Any) -> None:
        self.spawned.clear()
        self.participants.clear()

    def _on_spawned(self, **_: Any) -> None:
        if isinstance(self.runner, MasterRunner):
            self.participants = {c.id for c in self.runner.clients.values() if c.user_count > 0}
        else:
            self.participants = {"local"}
        self.spawned.set()

    def register(self, msg_type: str, handler: Any, *, coordinator: bool) -> None:
        if coordinator and self.is_coordinator or not coordinator and self.is_participant:
            self.runner.register_message(msg_type, handler)


class ClusterBarrier:
    """Every user of the test blocks in :meth:`wait` until all users have called it.

    Users of one process meet at a local count; the last local arrival tells the coordinator,
    which releases everyone once every participating process has arrived.
    """

    def __init__(self, environment: Any, name: str) -> None:
        self._roles = _Roles(environment)
        self._arrive, self._release = f"{name}:arrive", f"{name}:release"
        self._local: dict[int, int] = defaultdict(int)
        self._events: dict[int, Event] = defaultdict(Event)
        self._arrived: dict[int, set[str]] = defaultdict(set)
        self._released: set[int] = set()
        self.released_at: dict[int, float] = {}  # generation -> perf_counter() of local release
        self._roles.register(self._arrive, self._on_arrive, coordinator=True)
        self._roles.register(self._release, self._on_release, coordinator=False)
        environment.events.spawning_complete.add_listener(self._recheck)
        environment.events.test_start.add_listener(self._reset)

    def _reset(self, **_: Any) -> None:
        self._local.clear()
        self._events.clear()
        self._arrived.clear()
        self._released.clear()
        self.released_at.clear()

    def wait(self, generation: int, timeout: float | None = None) -> bool:
        """Block until every user has reached ``generation``; False on timeout."""
        self._roles.spawned.wait()
        released = self._events[generation]
        self._local[generation] += 1
        if self._local[generation] == self._roles.runner.user_count:
            self._roles.runner.send_message(self._arrive, {"generation": generation})
        return bool(released.wait(timeout))

    def _on_arrive(self, environment: Any, msg: Any, **_: Any) -> None:
        self._arrived[msg.data["generation"]].add(msg.node_id)
        self._recheck()

    def _recheck(self, **_: Any) -> None:
        if not self._roles.spawned.is_set():
            return  # arrivals are kept until the coordinator knows who participates
        for generation, nodes in list(self._arrived.items()):
            if generation not in self._released and nodes >= self._roles.participants:
                self._released.add(generation)
                self._roles.runner.send_message(self._release, {"generation": generation})

    def _on_release(self, environment: Any, msg: Any, **_: Any) -> None:
        generation = msg.data["generation"]
        self.released_at[generation] = time.perf_counter()
        self._events[generation].set()


class AutoStop:
    """Quit the whole test once every user has finished its bounded amount of work.

    A user calls :meth:`finished` and then stops (``raise StopUser``). When a process has no
    user left it tells the coordinator, which quits when every participant has said so.
    """

    def __init__(self, environment: Any, name: str = "autostop") -> None:
        self._roles = _Roles(environment)
        self._msg = f"{name}:done"
        self._done: set[str] = set()
        self._watching = False
        self._quitting = False
        self._roles.register(self._msg, self._on_done, coordinator=True)
        environment.events.test_start.add_listener(self._reset)

    def _reset(self, **_: Any) -> None:
        self._done.clear()
        self._watching = self._quitting = False

    def finished(self) -> None:
        """Called by a user that has nothing left to do."""
        if not self._watching:
            self._watching = True
            gevent.spawn(self._watch)

    def _watch(self) -> None:
        runner = self._roles.runner
        self._roles.spawned.wait()  # users still to be spawned have work to do too
        while runner.user_count > 0:
            gevent.sleep(0.1)
        runner.send_message(self._msg, {})

    def _on_done(self, environment: Any, msg: Any, **_: Any) -> None:
        self._done.add(msg.node_id)
        if self._roles.participants <= self._done and not self._quitting:
            self._quitting = True
            log.info("every user finished its work: stopping the test")
            gevent.spawn(self._quit)

    def _quit(self) -> None:
        runner = self._roles.runner
        runner.stop()  # workers send their last statistics as they stop
        gevent.sleep(CSV_STATS_INTERVAL_SEC + 0.5)  # one more --csv write with the final numbers
        runner.quit()
